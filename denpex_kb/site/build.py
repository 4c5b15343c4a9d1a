"""Writing the hub's Markdown pages from the knowledge base, then building the site with mkdocs-material."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from packaging.version import Version

from ..loader import KnowledgeBase
from ..model import PHASE_INFO, Entry, Phase
from ..normalize import strip_prefixes
from .audit import SiteProblem, audit_site
from .render import phase_title, to_markdown
from .sanitize import safe_inline, safe_label

RECENT = 10


def _signature_line(entry: Entry, limit: int = 90) -> str:
    """The line users will recognise: the first line of the first real example that is not a traceback frame."""
    for line in entry.examples.match[0].text.splitlines():
        text = strip_prefixes(line).text
        if text and not text.startswith(("File ", "Traceback")):
            return text if len(text) <= limit else text[: limit - 1] + "…"
    return entry.title


def _code(text: str) -> str:
    """A code span for a table cell: fenced by a backtick run longer than any inside, `|` escaped."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    body = text.replace("|", "\\|")
    return f"{ticks} {body} {ticks}" if longest else f"{ticks}{body}{ticks}"


def phase_page(phase: Phase, entries: list[Entry]) -> str:
    title, meaning = PHASE_INFO[phase]
    rows = [
        f"| [{safe_label(e.title)}](../entries/{e.id}.md) | {_code(_signature_line(e))} | {e.severity.value} |"
        for e in sorted(entries, key=lambda e: e.title.lower())
    ]
    table = "| Failure | What the log says | Severity |\n|---|---|---|\n" + "\n".join(rows) if rows else "_No entries yet._"
    return f"---\ntitle: {title}\n---\n# {title}\n\n{meaning}\n\n{table}\n"


def home_page(kb: KnowledgeBase) -> str:
    entries = list(kb.entries.values())
    counts = "\n".join(
        f"| [{PHASE_INFO[p][0]}](phases/{p.value}.md) | {sum(e.phase is p for e in entries)} | {PHASE_INFO[p][1]} |"
        for p in Phase
    )
    recent = sorted(entries, key=lambda e: (Version(e.since), e.id), reverse=True)[:RECENT]
    recent_rows = "\n".join(f"- [{safe_label(e.title)}](entries/{e.id}.md) <small>({phase_title(e.phase)}, since {e.since})</small>" for e in recent)
    return f"""---
title: The failure hub
hide:
  - navigation
---
# The failure hub

Your training job just died. This hub names what killed it and how to fix it: {len(entries)} failures of PyTorch,
DeepSpeed, FSDP, NCCL, CUDA, Megatron, Hugging Face, Slurm and the GPUs themselves, each with the text the software
really prints, how to tell it from its look-alikes, the fix, and the commands that keep the evidence and prove the fix.

Paste the error into the search box above, or let the command line find it, locally, with no log leaving your machine:

```bash
pip install denpex-kb
denpex-kb match "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB."
# a whole multi-rank log, plain or .gz: the first failure, its fix, the fallout
denpex-kb scan job-1234.log
```

## By phase of the job

| Phase | Entries | What happens there |
|---|---|---|
{counts}

## Recently added

{recent_rows}

Browse by [tag](tags.md). Found a failure that is missing, or a wrong match?
[Open an issue](https://github.com/denpex-kb/denpex-kb/issues/new/choose).
"""


def write_docs(kb: KnowledgeBase, docs: Path) -> list[Path]:
    """Write every page into `docs` (emptied first: it is generated, never edited)."""
    if docs.exists():
        shutil.rmtree(docs)
    (docs / "entries").mkdir(parents=True)
    (docs / "phases").mkdir()
    written = []

    def put(rel: str, text: str) -> None:
        path = docs / rel
        path.write_text(text, encoding="utf-8")
        written.append(path)

    put("index.md", home_page(kb))
    for phase in Phase:
        put(f"phases/{phase.value}.md", phase_page(phase, [e for e in kb.entries.values() if e.phase is phase]))
    for entry in kb.entries.values():
        put(f"entries/{entry.id}.md", to_markdown(entry))
    groups = kb.tags
    described = "\n".join(
        f"- **{safe_inline(tag)}** ({group}): {safe_inline(text)}" for group, tags in groups.items() for tag, text in tags.items()
    )
    put("tags.md", f"---\ntitle: Tags\n---\n# Tags\n\n<!-- material/tags -->\n\n## The vocabulary\n\n{described}\n")
    return written


def redirect_map(kb: KnowledgeBase) -> dict[str, str]:
    return {
        f"entries/{old}.md": f"entries/{stone.replaced_by}.md"
        for old, stone in sorted(kb.tombstones.items())
        if stone.replaced_by in kb.entries
    }


def build_site(kb: KnowledgeBase, config_file: Path, docs: Path, site: Path) -> None:
    """`mkdocs build --strict` on the committed config, with the generated parts (redirects, allowed tags) added."""
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    write_docs(kb, docs)
    cfg = load_config(str(config_file), docs_dir=str(docs.resolve()), site_dir=str(site.resolve()), strict=True)
    redirects = cfg.plugins.get("redirects")
    if redirects is not None:
        redirects.config["redirect_maps"] = redirect_map(kb)
    tags = cfg.plugins.get("material/tags")
    if tags is not None:
        from material.plugins.tags.structure.tag import Tag

        tags.config.tags_allowed = {Tag(t) for t in kb.tag_group}
    build(cfg)
    problems = audit_site(site)
    if problems:
        raise UnsafeSiteError(problems)


class UnsafeSiteError(Exception):
    """The built site holds script, an event handler or a dangerous URL; nothing of it may be published."""

    def __init__(self, problems: list[SiteProblem]) -> None:
        self.problems = problems
        lines = "\n".join(p.render() for p in problems[:20])
        more = f"\n... and {len(problems) - 20} more" if len(problems) > 20 else ""
        super().__init__(f"the built site is unsafe ({len(problems)} problems):\n{lines}{more}")
