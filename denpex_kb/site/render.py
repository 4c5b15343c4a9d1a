"""One renderer for an entry: a list of sections, written out as a hub page (Markdown) or as terminal text.

`entry_sections` decides what an entry shows and in which order; `to_markdown` and `to_terminal` only decide
how. So `denpex-kb explain ID` and the entry's page never disagree.
"""

from __future__ import annotations

import html
import json
import shutil
import textwrap
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..model import PHASE_INFO, Entry, Framework, Phase
from .blocks import terminal_blocks
from .sanitize import fence, link, safe_inline, safe_label, safe_markdown

REPO_URL = "https://github.com/denpex-kb/denpex-kb"

FRAMEWORK_LABELS = {
    Framework.pytorch: "PyTorch",
    Framework.deepspeed: "DeepSpeed",
    Framework.fsdp: "FSDP",
    Framework.hf_trainer: "HF Trainer",
    Framework.accelerate: "Accelerate",
    Framework.lightning: "Lightning",
    Framework.megatron: "Megatron",
    Framework.slurm: "Slurm",
    Framework.kubernetes: "Kubernetes",
}
PURPOSE_LABELS = {"preserve": "Preserve the evidence", "diagnose": "Diagnose", "verify": "Verify the fix"}
# What each relation says about the related entry, as a reader of this one needs it.
RELATION_LABELS = {
    "sibling": "a look-alike",
    "collateral-of": "usually the failure behind this one",
    "often-caused-by": "a frequent root cause of this one",
    "replaced-by": "supersedes this entry",
}


@dataclass
class Section:
    title: str
    items: list[tuple[str, Any]] = field(default_factory=list)  # (kind, payload)

    def add(self, kind: str, payload: Any) -> Section:
        self.items.append((kind, payload))
        return self


def edit_url(entry_id: str) -> str:
    return f"{REPO_URL}/edit/main/kb/{entry_id}.yaml"


def report_url(entry_id: str) -> str:
    query = urllib.parse.urlencode({"template": "false-match.yml", "entry": entry_id, "title": f"False match: {entry_id}"})
    return f"{REPO_URL}/issues/new?{query}"


RETRY_MEANING = {
    "no": "Do not rerun as is: the same job fails the same way until the cause is fixed.",
    "yes": "Rerun as is: the failure is transient.",
    "elsewhere": "Rerun without the node, GPU or link that the log names, and take that one out of service.",
    "depends": "It depends; the checklist tells the cases apart.",
}


def response_text(entry: Entry) -> str:
    """The response block as one paragraph: what a person or a scheduler should do with the job."""
    assert entry.response is not None
    r = entry.response
    text = f"**retry: {r.retry.value}, blame: {r.blame.value}.** {RETRY_MEANING[r.retry.value]}"
    return text + (f" {r.note}" if r.note else "")


def phase_title(phase: Phase | str) -> str:
    return PHASE_INFO[Phase(phase)][0]


def entry_sections(entry: Entry, titles: Mapping[str, str] | None = None) -> list[Section]:
    """What an entry shows, in order. Payload kinds: text (markdown), list, tasks, code, tabs, pairs, links.
    `titles` (id to title) names the related entries; an id it lacks is shown as the id."""
    sections: list[Section] = []
    first = entry.examples.match[0].text
    sections.append(Section("What you see").add("code", first.strip()).add("text", entry.summary))
    sections.append(Section("Symptoms").add("list", entry.symptoms))
    sections.append(Section("Causes").add("list", entry.causes))
    cond = entry.conditions
    conditions = Section("Conditions")
    if cond.notes:
        conditions.add("list", cond.notes)
    pairs = [(pkg, spec) for pkg, spec in sorted(cond.versions.items())]
    if pairs:
        conditions.add("versions", [(f"`{p}`", f"`{s}`") for p, s in pairs])
    extra = [(label, value) for label, value in (("Scale", cond.scale), ("Hardware", cond.hardware)) if value]
    if extra:
        conditions.add("pairs", extra)
    if conditions.items:
        sections.append(conditions)
    sections.append(Section("Checklist").add("tasks", entry.checklist))
    fix = Section("Fix").add("text", f"**{entry.fix.summary}**").add("text", entry.fix.body)
    if entry.fix.variants:
        fix.add("tabs", [(FRAMEWORK_LABELS[v.framework], v.body) for v in entry.fix.variants])
    sections.append(fix)
    if entry.response:
        sections.append(Section("Rerun or fix first").add("text", response_text(entry)))
    if entry.commands:
        commands = Section("Commands")
        for purpose in ("preserve", "diagnose", "verify"):
            chosen = [c for c in entry.commands if c.purpose.value == purpose]
            if chosen:
                commands.add("subheading", PURPOSE_LABELS[purpose])
                for c in chosen:
                    commands.add("text", c.description).add("shell", c.run)
        sections.append(commands)
    sigs = Section("Signatures")
    for s in entry.signatures:
        printed_by = ", ".join(f"{package} {spec}" for package, spec in sorted(s.versions.items()))
        sigs.add("text", f"{s.kind.value}, {s.stream.value}, {s.role.value}" + (f": {s.note}" if s.note else "")
                 + (f" (printed by {printed_by})" if printed_by else ""))
        sigs.add("code", s.text)
    sections.append(sigs)
    examples = Section("Real output")
    for ex in entry.examples.match:
        examples.add("code", ex.text.rstrip())
        examples.add("source", ex.source)
    if entry.examples.no_match:
        examples.add("subheading", "Not this failure")
        for nm in entry.examples.no_match:
            examples.add("code", nm.text.rstrip())
            if nm.note:
                examples.add("text", nm.note)
    sections.append(examples)
    if entry.related:
        named = titles or {}
        sections.append(Section("Related").add("related", [(r.id, r.relation.value, named.get(r.id, r.id)) for r in entry.related]))
    if entry.references:
        sections.append(Section("References").add("links", [(r.url, r.title) for r in entry.references]))
    return sections


# --- Markdown (the hub) ---------------------------------------------------------------------------------


def front_matter(entry: Entry) -> str:
    # The theme prints `page.meta.*` into <title>, the header, <meta> and the tags index without escaping,
    # and the search index takes the title as HTML: so the text goes in escaped, once, here.
    meta = {
        "title": html.escape(" ".join(entry.title.split()), quote=True),
        "description": html.escape(" ".join(entry.summary.split()), quote=True),
        "tags": list(entry.tags),
        "entry_id": entry.id,
        "phase": entry.phase.value,
        "phase_title": phase_title(entry.phase),
        "status": entry.status,
        "severity": entry.severity.value,
        "retry": entry.response.retry.value if entry.response else None,
        "blame": entry.response.blame.value if entry.response else None,
        "since": entry.since,
        "edit_url": edit_url(entry.id),
        "report_url": report_url(entry.id),
    }
    # JSON is valid YAML and escapes every string safely.
    lines = [f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in meta.items()]
    return "---\n" + "\n".join(lines) + "\n---\n"


def _source_md(source: str) -> str:
    if source.startswith(("http://", "https://")):
        return "Source: " + link(source, source)
    return "Source: " + safe_inline(source)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")  # a contributor's `|` must not open a new cell


def to_markdown(entry: Entry, titles: Mapping[str, str] | None = None) -> str:
    """The entry's page. `titles` (every entry's id to its title) names related entries, and makes a code span
    holding another entry's id a link to that entry."""
    known = frozenset(titles or ()) - {entry.id}
    out = [front_matter(entry), f"# {safe_inline(entry.title)}\n"]
    for section in entry_sections(entry, titles):
        out.append(f"## {section.title}\n")
        for kind, payload in section.items:
            if kind == "text":
                out.append(safe_markdown(payload, known) + "\n")
            elif kind == "subheading":
                out.append(f"### {payload}\n")
            elif kind == "list":
                out.append("\n".join(f"- {safe_inline(x, known)}" for x in payload) + "\n")
            elif kind == "tasks":
                out.append("\n".join(f"- [ ] {safe_inline(x, known)}" for x in payload) + "\n")
            elif kind == "code":
                out.append(fence(payload) + "\n")
            elif kind == "shell":
                out.append(fence(payload, "bash") + "\n")
            elif kind == "source":
                out.append(f"<small>{_source_md(payload)}</small>\n")
            elif kind == "versions":
                rows = [f"| {safe_inline(a)} | {safe_inline(b)} |" for a, b in payload]
                out.append("**Affected versions**\n\n| Package | Versions |\n|---|---|\n" + "\n".join(rows) + "\n")
            elif kind == "pairs":
                rows = [f"| {_cell(safe_inline(a))} | {_cell(safe_inline(b, known))} |" for a, b in payload]
                out.append("| Condition | Details |\n|---|---|\n" + "\n".join(rows) + "\n")
            elif kind == "tabs":
                for label, body in payload:
                    out.append(f'=== "{label}"\n\n' + textwrap.indent(safe_markdown(body, known), "    ") + "\n")
            elif kind == "related":
                out.append("\n".join(
                    f"- [{safe_label(title)}]({rid}.md) <small>({rel}: {RELATION_LABELS.get(rel, rel)})</small>"
                    for rid, rel, title in payload
                ) + "\n")
            elif kind == "links":
                out.append("\n".join(f"- {link(url, title)}" for url, title in payload) + "\n")
    return "\n".join(out)


# --- Terminal (`denpex-kb explain`) ----------------------------------------------------------------------


def to_terminal(entry: Entry, width: int | None = None, titles: Mapping[str, str] | None = None) -> str:
    width = width or min(shutil.get_terminal_size((100, 20)).columns, 100)
    out = [entry.title, "=" * min(len(entry.title), width)]
    out.append(f"id: {entry.id}   phase: {entry.phase.value}   severity: {entry.severity.value}   status: {entry.status}")
    for section in entry_sections(entry, titles):
        if section.title in ("Real output", "Signatures"):
            continue  # long and raw; the page has them
        out.append("")
        out.append(section.title.upper())
        for kind, payload in section.items:
            if kind == "text":
                out.extend(terminal_blocks(str(payload), width))
            elif kind == "subheading":
                out.append(f"  {payload}:")
            elif kind in ("list", "tasks"):
                mark = "[ ] " if kind == "tasks" else "- "
                for x in payload:
                    out.append(textwrap.fill(" ".join(x.split()), width, initial_indent="  " + mark, subsequent_indent="  " + " " * len(mark)))
            elif kind in ("code", "shell"):
                prefix = "    $ " if kind == "shell" else "    "
                out.extend(prefix + ln for ln in payload.splitlines()[:12])
            elif kind in ("pairs", "versions"):
                if kind == "versions":
                    out.append("  Affected versions:")
                out.extend(f"  {a}: {b}".replace("`", "") for a, b in payload if b)
            elif kind == "tabs":
                for label, body in payload:
                    out.append(f"  [{label}]")
                    out.extend(terminal_blocks(body.strip("\n"), width, indent="    "))
            elif kind == "related":
                for rid, rel, title in payload:
                    said = f"{' '.join(title.split())} ({rid}; {rel}: {RELATION_LABELS.get(rel, rel)})"
                    out.append(textwrap.fill(said, width, initial_indent="  - ", subsequent_indent="    "))
            elif kind == "links":
                out.extend(f"  - {title}: {url}" for url, title in payload)
    return "\n".join(out) + "\n"
