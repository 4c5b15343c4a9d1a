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

from .bundle import KbIndex
from .compiler import index_from_kb
from .loader import KnowledgeBase, Loaded
from .matcher import match, match_line
from .normalize import strip_prefixes
from .problems import Problem
from .scanner import scan

BENIGN_DIR = Path("tests") / "corpus" / "benign"
ALLOWLIST = "allowlist.yaml"
TOO_GENERIC = 2  # distinct benign lines one signature may match before it is called too generic
# An anchor on this share of the benign corpus's lines (and on at least HOT_LINES of them) is hot: in a real log
# it would send a large part of the healthy lines down the per-line path.
HOT_SHARE = 0.01
HOT_LINES = 5
BENIGN_CODES = frozenset({"DKB204", "DKB205", "DKB206"})  # problems of the benign corpus, as opposed to an entry's examples


@dataclass
class ExampleOutcome:
    kind: str  # "match" or "no_match"
    number: int  # index in the entry's list
    text: str
    ok: bool
    expected: str | None  # the entry that should rank first (match) or None (no_match)
    reported: str | None  # what ranked first, or the entry that wrongly matched
    # A match example no signature ranks right: the entry the fuzzy tier would name (its own wording left out),
    # so the author sees that the example is this failure's and a signature is what is missing.
    fuzzy: str | None = None


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
    def fuzzy_only(self) -> int:
        """Match examples that only the fuzzy tier names as this entry."""
        return sum(o.fuzzy == self.id for o in self.outcomes if o.kind == "match" and not o.ok)

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outcomes)


def run_examples(kb: KnowledgeBase, index: KbIndex, ids: list[str] | None = None) -> list[EntryResult]:
    results = []
    for entry_id in sorted(ids or kb.entries):
        entry = kb.entries[entry_id]
        result = EntryResult(entry_id)
        for i, ex in enumerate(entry.examples.match):
            ranked = match(ex.text, top=10, index=index, fuzzy=False)  # signatures must catch it
            first = ranked[0].id if ranked else None
            outcome = ExampleOutcome("match", i, ex.text, first == entry_id, entry_id, first)
            if not outcome.ok:
                outcome.fuzzy = _fuzzy_names(index, entry_id, i, ex.text)
            result.outcomes.append(outcome)
        for i, nex in enumerate(entry.examples.no_match):
            ranked = match(nex.text, top=50, index=index, fuzzy=False)
            hit = entry_id in {r.id for r in ranked}
            result.outcomes.append(ExampleOutcome("no_match", i, nex.text, not hit, None, entry_id if hit else None))
        results.append(result)
    return results


def _fuzzy_names(index: KbIndex, entry_id: str, number: int, text: str) -> str | None:
    """The entry the fuzzy tier names for an example, with the example's own wording left out of its index."""
    fz = index.fuzzy
    if fz is None or entry_id not in index.by_id:
        return None
    me = index.entries.index(index.by_id[entry_id])
    own = frozenset(k for k, known in enumerate(fz.known) if known.entry == me and known.origin == f"example:{number}")
    for raw in text.splitlines():
        found = fz.answer_raw(raw, own)
        if found is not None:
            return index.entries[fz.known[found[0]].entry].id
    return None


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
                close = (f" (only the fuzzy tier names {o.fuzzy}: the wording is this failure's, a signature is missing)"
                         if o.fuzzy == result.id else "")
                problems.append(Problem.of("DKB201", loaded.display, line, col,
                    f"match example {o.number + 1} ({_short(o.text)!r}) matches no entry{close}; widen a signature of "
                    f"{result.id} to cover this wording, or drop the example if it is not this failure"))
            elif o.kind == "match":
                problems.append(Problem.of("DKB202", loaded.display, line, col,
                    f"match example {o.number + 1} ranks {o.reported!r} first, not {result.id!r}: {o.reported} shadows "
                    f"{result.id}; make {o.reported}'s signature more specific, or {result.id}'s longer"))
            else:
                problems.append(Problem.of("DKB203", loaded.display, line, col,
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
            problems.append(Problem.of("DKB204", shown, f.line_number, 1,
                f"healthy output gives a finding ({what}) on {f.text[:90]!r}; make the entry's signature more specific, "
                f"or add a reviewed exception to {benign.name}/{ALLOWLIST}"))
        with log.open(encoding="utf-8", errors="replace") as fh:
            for raw in fh:
                line = strip_prefixes(raw)
                for sig, _m in match_line(line.text, index):
                    sig_hits[(sig.entry.id, sig.number)].append(line.text)
    problems.extend(hot_anchor_problems(kb, index, benign))
    for (entry_id, number), texts in sorted(sig_hits.items()):
        distinct = sorted(set(texts))
        if len(distinct) >= TOO_GENERIC and entry_id in kb.files:
            loaded = kb.files[entry_id]
            line_no, col = loaded.where("signatures", number, "text")
            problems.append(Problem.of("DKB205", loaded.display, line_no, col,
                f"signature {number + 1} of {entry_id} matches {len(distinct)} distinct lines of the benign corpus "
                f"(e.g. {distinct[0][:80]!r}); it is too generic: add the words that only the failure prints"))
    return problems


def hot_anchors(index: KbIndex, lines: list[str]) -> dict[str, int]:
    """Anchors the scan's prefilter searches for that hold on at least HOT_SHARE (and HOT_LINES) of `lines`."""
    least = max(HOT_LINES, int(len(lines) * HOT_SHARE + 0.999))
    counts = {a: sum(a in line for line in lines) for a in index.prefilter_anchors}
    return {a: n for a, n in sorted(counts.items()) if n >= least}


def hot_anchor_problems(kb: KnowledgeBase, index: KbIndex, benign: Path) -> list[Problem]:
    lines = [raw for log in sorted(benign.glob("*.log"))
             for raw in log.read_text(encoding="utf-8", errors="replace").splitlines()
             if raw.strip() and not raw.startswith("#")]  # a comment names the source of the lines below it
    problems = []
    for anchor, count in hot_anchors(index, lines).items():
        owners: list[tuple[str, tuple[str | int, ...]]] = [
            (s.entry.id, ("signatures", s.number, "text")) for s in index.signatures if anchor in s.anchors]
        owners += [(fp.entry.id, ("fingerprint", "events", k, "text")) for fp in index.fingerprints
                   for k, ev in enumerate(fp.events) if anchor in ev.anchors]
        for entry_id, loc in owners:
            if entry_id not in kb.files:
                continue
            loaded = kb.files[entry_id]
            line_no, col = loaded.where(*loc)
            problems.append(Problem.of("DKB206", loaded.display, line_no, col,
                f"anchor {anchor!r} of {entry_id} is on {count} of the {len(lines)} benign corpus lines; every such "
                "line of a real log would be matched one by one: give a longer anchor, or `level: info` to a "
                "fingerprint event that is healthy output"))
    return problems


def example_problems(kb: KnowledgeBase, ids: list[str] | None = None) -> list[Problem]:
    index = index_from_kb(kb, strict=False)
    problems = outcome_problems(kb, run_examples(kb, index, ids))
    benign = find_benign_dir(kb.root)
    if benign is not None and not ids:
        problems.extend(benign_problems(kb, index, benign))
    return problems


