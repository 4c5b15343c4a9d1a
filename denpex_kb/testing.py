"""Running the entries' examples, and the benign corpus, through the real matcher.

An entry's `match` examples must rank it first (another entry first is shadowing); its `no_match` examples
must not match it at all; and healthy training output must produce no finding. A signature that fires on
several benign lines is too generic.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from .bundle import KbIndex, index_from_kb_dir
from .loader import KnowledgeBase, Loaded
from .matcher import match, match_line
from .normalize import strip_prefixes
from .problems import Problem
from .scanner import scan

BENIGN_DIR = Path("tests") / "corpus" / "benign"
ALLOWLIST = "allowlist.yaml"
TOO_GENERIC = 2  # distinct benign lines one signature may match before it is called too generic


@dataclass
class ExampleOutcome:
    kind: str  # "match" or "no_match"
    number: int  # index in the entry's list
    text: str
    ok: bool
    expected: str | None  # the entry that should rank first (match) or None (no_match)
    reported: str | None  # what ranked first, or the entry that wrongly matched


@dataclass
class EntryResult:
    id: str
    outcomes: list[ExampleOutcome] = field(default_factory=list)

    @property
    def true_positives(self) -> int:
        return sum(o.ok for o in self.outcomes if o.kind == "match")

    @property
    def false_negatives(self) -> int:
        return sum(not o.ok for o in self.outcomes if o.kind == "match")

    @property
    def false_positives(self) -> int:
        return sum(not o.ok for o in self.outcomes if o.kind == "no_match")

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outcomes)


def run_examples(kb: KnowledgeBase, index: KbIndex, ids: list[str] | None = None) -> list[EntryResult]:
    results = []
    for entry_id in sorted(ids or kb.entries):
        entry = kb.entries[entry_id]
        result = EntryResult(entry_id)
        for i, ex in enumerate(entry.examples.match):
            ranked = match(ex.text, top=10, index=index)
            first = ranked[0].id if ranked else None
            result.outcomes.append(ExampleOutcome("match", i, ex.text, first == entry_id, entry_id, first))
        for i, nex in enumerate(entry.examples.no_match):
            ranked = match(nex.text, top=50, index=index)
            hit = entry_id in {r.id for r in ranked}
            result.outcomes.append(ExampleOutcome("no_match", i, nex.text, not hit, None, entry_id if hit else None))
        results.append(result)
    return results


def _short(text: str) -> str:
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first[:90] + ("..." if len(first) > 90 else "")


def outcome_problems(kb: KnowledgeBase, results: list[EntryResult]) -> list[Problem]:
    problems = []
    for result in results:
        loaded: Loaded = kb.files[result.id]
        for o in result.outcomes:
            if o.ok:
                continue
            line, col = loaded.where("examples", o.kind, o.number, "text")
            if o.kind == "match" and o.reported is None:
                problems.append(Problem(loaded.display, line, col, "DKB201", "examples",
                    f"match example {o.number + 1} ({_short(o.text)!r}) matches no entry; widen a signature of {result.id} "
                    "to cover this wording, or drop the example if it is not this failure"))
            elif o.kind == "match":
                problems.append(Problem(loaded.display, line, col, "DKB202", "shadowing",
                    f"match example {o.number + 1} ranks {o.reported!r} first, not {result.id!r}: {o.reported} shadows "
                    f"{result.id}; make {o.reported}'s signature more specific, or {result.id}'s longer"))
            else:
                problems.append(Problem(loaded.display, line, col, "DKB203", "examples",
                    f"no_match example {o.number + 1} ({_short(o.text)!r}) matches {result.id}; make its signatures "
                    "specific enough to exclude this benign line"))
    return problems


def find_benign_dir(kb_root: Path) -> Path | None:
    for candidate in (kb_root.parent / BENIGN_DIR, Path.cwd() / BENIGN_DIR):
        if candidate.is_dir():
            return candidate
    return None


def _allowlist(benign: Path) -> list[dict[str, Any]]:
    path = benign / ALLOWLIST
    if not path.is_file():
        return []
    data = YAML(typ="safe").load(path.read_text(encoding="utf-8")) or []
    return [d for d in data if isinstance(d, dict)]


def benign_problems(kb: KnowledgeBase, index: KbIndex, benign: Path) -> list[Problem]:
    """Findings in healthy output, and signatures that fire on several benign lines."""
    allowed = _allowlist(benign)
    problems = []
    sig_hits: dict[tuple[str, int], list[str]] = defaultdict(list)
    for log in sorted(benign.glob("*.log")):
        shown = log.as_posix()
        report = scan(log, index=index)
        for f in report.findings:
            if any(a.get("file") == log.name and a.get("id") == f.id and a.get("text", "") in f.text for a in allowed):
                continue
            what = f"entry {f.id!r}" if f.id else f"an unrecognised {f.exception}"
            problems.append(Problem(shown, f.line, 1, "DKB204", "benign-corpus",
                f"healthy output gives a finding ({what}) on {f.text[:90]!r}; make the entry's signature more specific, "
                f"or add a reviewed exception to {benign.name}/{ALLOWLIST}"))
        with log.open(encoding="utf-8", errors="replace") as fh:
            for raw in fh:
                line = strip_prefixes(raw)
                for sig, _m in match_line(line.text, index):
                    sig_hits[(sig.entry.id, sig.number)].append(line.text)
    for (entry_id, number), texts in sorted(sig_hits.items()):
        distinct = sorted(set(texts))
        if len(distinct) >= TOO_GENERIC and entry_id in kb.files:
            loaded = kb.files[entry_id]
            line_no, col = loaded.where("signatures", number, "text")
            problems.append(Problem(loaded.display, line_no, col, "DKB205", "too-generic",
                f"signature {number + 1} of {entry_id} matches {len(distinct)} distinct lines of the benign corpus "
                f"(e.g. {distinct[0][:80]!r}); it is too generic: add the words that only the failure prints"))
    return problems


def example_problems(kb: KnowledgeBase, ids: list[str] | None = None) -> list[Problem]:
    index = index_from_kb_dir(kb.root, strict=False)
    problems = outcome_problems(kb, run_examples(kb, index, ids))
    benign = find_benign_dir(kb.root)
    if benign is not None and not ids:
        problems.extend(benign_problems(kb, index, benign))
    return problems


