"""A new entry file: every section of the model, a comment above each, and placeholders where a person must write.

Placeholders are values the model rejects (an empty string, or `<fill in: a|b>` where a choice is needed), so
`denpex-kb check` points at each one with file:line:col until it is filled in. From a pasted error line the
scaffold also proposes a template signature and the first match example.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import re2
from rapidfuzz import fuzz, process
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from . import __version__
from .errors import DenpexError
from .loader import SCHEMA_LINE, KnowledgeBase
from .masks import mask_line, masked_spans
from .model import Blame, CommandPurpose, Phase, Relation, Retry, Severity, SignatureKind, is_valid_id
from .normalize import exception_type, strip_prefixes
from .signatures import MIN_ANCHOR
from .templates import TemplateError, compile_template
from .yamlio import position

PLACEHOLDER_MARK = "<fill in"
SOURCE_PLACEHOLDER = "captured: <fill in software and version>"
SIMILAR = 85  # percent: a pasted line this close to an existing example is probably that failure
_ID_WORDS = 5
_MIN_SIMILAR_WORDS = 4
_MIN_MESSAGE = 12  # literal characters a message needs to stand without its exception class


class ScaffoldError(DenpexError, ValueError):
    """The pasted text cannot be made into a signature."""


def choice(values: list[str]) -> str:
    """A placeholder for an enum field: invalid as it stands, and it lists what is allowed."""
    return f"{PLACEHOLDER_MARK}: {' | '.join(values)}>"


# --- proposing a signature from a pasted line --------------------------------------------------------------


@dataclass
class Proposal:
    raw: str  # the text as pasted
    text: str  # the normalised line the template was made from
    template: str
    kind: SignatureKind = SignatureKind.template
    warnings: list[str] = field(default_factory=list)


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def template_for(text: str) -> str:
    """`text` with every variable part (numbers, sizes, paths, addresses) replaced by its placeholder."""
    out: list[str] = []
    last = 0
    for start, end, name in masked_spans(text):
        out.append(_escape(text[last:start]))
        out.append("{" + name + "}")
        last = end
    out.append(_escape(text[last:]))
    return "".join(out)


def template_matches(template: str, text: str) -> bool:
    try:
        compiled = compile_template(template)
    except TemplateError:
        return False
    return re2.search(compiled.pattern, text) is not None


def _error_line(pasted: str) -> str:
    """The line of a pasted block that carries the error: the one naming an exception, else the first."""
    lines = [strip_prefixes(r).text for r in pasted.splitlines()]
    lines = [t for t in lines if t]
    for t in lines:
        if exception_type(t):
            return t
    return lines[0] if lines else ""


def _without_exception(text: str) -> str:
    """The message without its exception class, which changes across releases (RuntimeError -> OutOfMemoryError)."""
    exc = exception_type(text)
    if not exc or not text.startswith(exc + ":"):
        return text
    message = text[len(exc) + 1 :].strip()
    literal = re.sub(r"\{[a-z]+\}", "", mask_line(message))
    return message if len(literal.strip()) >= _MIN_MESSAGE else text


def propose(raw: str) -> Proposal:
    text = _error_line(raw)
    if not text:
        raise ScaffoldError("the pasted text is empty once prefixes are removed; paste the error line itself")
    message = _without_exception(text)
    template = template_for(message)
    proposal = Proposal(raw, text, template)
    if not template_matches(template, text):
        # The masks disagree with the template compiler on this line; fall back to the text as it is.
        proposal.template = _escape(message)
        proposal.warnings.append(
            "could not build a template that matches the line; the signature is the literal text, replace its "
            "variable parts with placeholders by hand"
        )
        if not template_matches(proposal.template, text):
            raise ScaffoldError("the pasted line cannot be turned into a signature; write one by hand")
    literals = compile_template(proposal.template).literals
    if max((len(x.strip()) for x in literals), default=0) < MIN_ANCHOR:
        proposal.warnings.append(
            f"the proposed signature has no fixed text of {MIN_ANCHOR} characters or more; `check` will ask for a "
            "longer literal part or `anchors:`"
        )
    return proposal


def derive_id(text: str) -> str:
    """A kebab-case id from the first clause of the message (falling back to the exception class's words)."""
    exc = exception_type(text)
    message = text[len(exc) + 1 :] if exc and text.startswith(exc + ":") else text
    clause = re.split(r"[.:;,(\[]", mask_line(message).strip(), maxsplit=1)[0]
    words = [w for w in re.findall(r"[a-z0-9]+", re.sub(r"\{[a-z]+\}", " ", clause.lower())) if len(w) > 1]
    if len(words) < 2 and exc:
        camel = re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+", exc.split(".")[-1])
        words = [w.lower() for w in camel] + words
    return "-".join(words[:_ID_WORDS])


def similar_entries(text: str, kb: KnowledgeBase, limit: int = 3) -> list[tuple[str, int]]:
    """Entries with a match example close to `text` (masked, so numbers and paths do not count), best first."""
    choices: dict[tuple[str, int], str] = {}
    for entry in kb.entries.values():
        for i, ex in enumerate(entry.examples.match):
            for j, raw in enumerate(ex.text.splitlines()):
                seen = strip_prefixes(raw).text
                if seen:
                    choices[(entry.id, i * 10_000 + j)] = mask_line(seen)
    query = mask_line(text)
    if len(query.split()) < _MIN_SIMILAR_WORDS:
        return []  # a few words are a subset of too many lines to say anything
    found: dict[str, int] = {}
    # token_set_ratio: a pasted line is often a part of a longer example (or the reverse), in the same words.
    for _choice, score, key in process.extract(query, choices, scorer=fuzz.token_set_ratio, score_cutoff=SIMILAR, limit=50):
        found[key[0]] = max(found.get(key[0], 0), round(score))
    ranked = sorted(found.items(), key=lambda kv: (-kv[1], kv[0]))
    # Only the close runners-up: a generic shared phrase ("CUDA error:") lifts unrelated entries too.
    return [(i, s) for i, s in ranked if s >= ranked[0][1] - 5][:limit] if ranked else []


# --- the file ----------------------------------------------------------------------------------------------


def quote(value: str) -> str:
    """A double-quoted YAML scalar for `value` on one line (JSON escapes, plus what YAML forbids raw)."""
    out = json.dumps(value, ensure_ascii=False)
    return re.sub(
        "[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]", lambda m: f"\\u{ord(m.group()):04x}", out
    )


def _block(value: str, indent: int) -> str:
    """A `|` block for a multi-line value, or a quoted scalar when a block could not hold it exactly."""
    lines = value.split("\n")
    if value.endswith("\n"):
        lines = lines[:-1]
    unsafe = (
        not value.strip()
        or value.endswith("\n\n")
        or lines[0][:1] in (" ", "\t")
        or any(ln != ln.rstrip() or "\t" in ln or "\r" in ln for ln in lines)
        or quote(value) != json.dumps(value, ensure_ascii=False)
    )
    if unsafe:
        return quote(value)
    pad = " " * indent
    head = "|" if value.endswith("\n") else "|-"
    return head + "\n" + "\n".join(pad + ln if ln else "" for ln in lines)


def scalar(value: str, indent: int) -> str:
    return _block(value, indent) if "\n" in value else quote(value)


def _tag_hint(kb: KnowledgeBase) -> str:
    frameworks = sorted(kb.tags.get("framework", {}))
    return ", ".join(frameworks) if frameworks else "see kb/_tags.yaml"


def render(entry_id: str, phase: Phase | None, proposal: Proposal | None, kb: KnowledgeBase) -> str:
    """The scaffold's text, in the layout `denpex-kb fmt` produces."""
    phases = [p.value for p in Phase]
    relation = choice([r.value for r in Relation if r is not Relation.replaced_by])
    if proposal is not None:
        signature = quote(proposal.template)
        first_example = scalar(proposal.raw.strip("\r\n"), 8)
        first_source = quote(SOURCE_PLACEHOLDER)
    else:
        signature = first_example = first_source = '""'
    return f"""{SCHEMA_LINE}
# A new failure entry. Every `""` and `<fill in ...>` below is a placeholder: `denpex-kb check` points at each
# one until it is replaced. CONTRIBUTING.md explains each section and the review standard.
id: {entry_id}
# A short name for the failure, as a user would search for it (5 to 120 characters).
title: ""
# Two to four sentences in your own words: what fails, where, and what it means for the job.
summary: ""
# Where in the job's life the failure surfaces.
phase: {phase.value if phase else quote(choice(phases))}
# Tags from kb/_tags.yaml: at least one framework tag ({_tag_hint(kb)}), then components and symptoms.
tags: [""]
# How bad it is for the job that hits it.
severity: {quote(choice([s.value for s in Severity]))}
# draft until a reviewer has checked every example; then experimental or stable.
status: draft
# The denpex-kb version that first ships this entry.
since: {quote(__version__)}
# Text the failing software really prints, one line each: kind literal, regex (RE2) or template with
# placeholders such as {{size}}, {{num}}, {{path}}. Keep the words every wording shares; drop what varies.
signatures:
  - kind: template
    text: {signature}
    stream: stderr
    role: initiating
    # Add `note:` saying which software and versions print this wording.
# Optional: an ordered run of lines that identifies the failure better than any one line, e.g.
# fingerprint:
#   events:
#     - {{level: warn, kind: literal, text: "first line"}}
#     - {{level: error, kind: literal, text: "a later line"}}
#   within_lines: 200
# What the user sees: the error, the hang, what nvidia-smi or the launcher shows.
symptoms:
  - ""
# Why it happens, most common cause first.
causes:
  - ""
# When it happens: versions (PEP 440 specifiers), scale, hardware.
conditions:
  notes:
    - ""
  versions: {{}}
# How to tell this failure from its look-alikes, one check per item.
checklist:
  - ""
fix:
  # One line: what to change. Shown by `match` and `scan`.
  summary: ""
  # Markdown: the fix in full, with the commands or code to run.
  body: ""
  # Optional: the fix as done in one framework (pytorch, deepspeed, fsdp, hf-trainer, slurm, ...).
  variants: []
# What a scheduler should do once this failure started it all: rerun as is (yes), rerun without the named
# node/GPU/link (elsewhere), fix first (no), or depends (the note says on what). Justify it like any fact.
response:
  retry: {quote(choice([r.value for r in Retry]))}
  blame: {quote(choice([b.value for b in Blame]))}
  # note: "one sentence; needed when retry is depends"
# Shell commands: preserve evidence, diagnose, and verify the fix.
commands:
  - purpose: {quote(choice([c.value for c in CommandPurpose]))}
    description: ""
    run: ""
# Entries that are easy to confuse with this one, or that cause it.
related:
  - id: ""
    relation: {quote(relation)}
# Where the wording and the fix are documented: source files, issue threads, docs.
references:
  - url: ""
    title: ""
# Real output, verbatim, with provenance: its URL on the original site, or 'captured: <software> <version>'.
# At least four match examples with varied prefixes and wordings, and two benign look-alikes in no_match.
examples:
  match:
    - text: {first_example}
      source: {first_source}
    - text: ""
      source: ""
    - text: ""
      source: ""
    - text: ""
      source: ""
  # Each no_match item takes a `note:` saying why the line looks alike and why it is benign.
  no_match:
    - text: ""
    - text: ""
"""


def placeholders(doc: Any) -> list[tuple[tuple[Any, ...], int, int]]:
    """(path, line, col) of every placeholder left in a parsed entry: empty strings and `<fill in` values."""
    found: list[tuple[tuple[Any, ...], int, int]] = []

    def walk(node: Any, loc: tuple[Any, ...]) -> None:
        if isinstance(node, CommentedMap):
            for key, value in node.items():
                walk(value, (*loc, key))
        elif isinstance(node, CommentedSeq):
            for i, value in enumerate(node):
                walk(value, (*loc, i))
        elif isinstance(node, str) and (not node.strip() or PLACEHOLDER_MARK in node):
            found.append((loc, *position(doc, loc)))

    walk(doc, ())
    return found


def check_id(entry_id: str, kb: KnowledgeBase) -> str | None:
    """Why `entry_id` cannot be used for a new entry, or None."""
    if not is_valid_id(entry_id):
        return (
            f"{entry_id!r} is not a valid id: use 3 to 80 characters of lowercase letters, digits and single "
            "hyphens, e.g. nccl-watchdog-timeout"
        )
    if entry_id in kb.tombstones:
        stone = kb.tombstones[entry_id]
        where = f" (replaced by {stone.replaced_by})" if stone.replaced_by else ""
        return f"{entry_id!r} was retired{where}; ids are never reused, pick a new one"
    if entry_id in kb.files or (kb.root / f"{entry_id}.yaml").exists():
        return f"{entry_id!r} already exists (kb/{entry_id}.yaml); edit that entry, or pick a new id"
    return None
