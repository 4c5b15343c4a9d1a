"""Accuracy of `match` on the held-out set: recall on failures, abstention on unknown classes and benign text.

    python benchmarks/accuracy/run.py            # a table
    python benchmarks/accuracy/run.py --json     # the same figures as JSON

A measurement, not a unit test. Lines that have become (or contain, or are contained in) an entry example are
no longer held out: they are dropped and counted, with the rule of benchmarks/accuracy/README.md (whitespace
collapsed and lowercased; equal, contained in an example, or containing an example that covers >= 80% of it).

Per tier: each answered line is counted under the tier of its first answer (`exact`, `normalized`, `fuzzy` or
`evidence`; a Match without a `tier` field is `exact`). `--no-fuzzy` measures signatures alone (exact and
normalized tiers), for a side-by-side figure. `--artifacts` adds, for failure lines the matcher abstained on or got
wrong, how many show each kind of pasted-text artifact (aggregate counts only, never the lines).
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HELDOUT = ROOT / "benchmarks" / "accuracy" / "heldout.jsonl"
TIERS = ("exact", "normalized", "fuzzy", "evidence")

sys.path.insert(0, str(ROOT))
from denpex_kb.bundle import KbIndex, default_index  # noqa: E402
from denpex_kb.compiler import index_from_kb_dir  # noqa: E402
from denpex_kb.loader import load_kb  # noqa: E402
from denpex_kb.matcher import match  # noqa: E402

_WS = re.compile(r"\s+")


def norm(s: str) -> str:
    return _WS.sub(" ", s).strip().lower()


def kb_examples(kb_dir: Path) -> list[str]:
    """Every entry's match and no_match example texts, normalised as `leak` compares them."""
    return [norm(ex.text) for entry in load_kb(kb_dir).entries.values()
            for ex in (*entry.examples.match, *entry.examples.no_match)]


def leak(text: str, examples: list[str]) -> str | None:
    """How `text` overlaps an example: 'verbatim', 'contained', 'covers' (the README's 80% rule) or None."""
    t = norm(text)
    kind = None
    for e in examples:
        if t == e:
            return "verbatim"
        if t in e:
            kind = "contained"
        elif kind is None and len(e) >= 30 and e in t and len(e) >= 0.8 * len(t):
            kind = "covers"
    return kind


# Pasted-text artifacts, for the aggregate breakdown of misses. Detection only; never used to match.
ARTIFACTS: dict[str, re.Pattern[str]] = {
    "markdown-bold": re.compile(r"\*\*\S"),
    "backticks": re.compile(r"`"),
    "quote-marker": re.compile(r"(?m)^\s*>\s"),
    "list-bullet": re.compile(r"(?m)^\s*(?:[-*+•]|\d+[.)])\s+\S"),
    "markdown-link": re.compile(r"\]\((?:https?://|#)"),
    "smart-quotes": re.compile(r"[\u2018\u2019\u201c\u201d]"),
    "ellipsis": re.compile(r"\u2026|\.\.\.\s*$"),
    "windows-path": re.compile(r"[A-Za-z]:\\"),
    "doubled-space": re.compile(r"\S {2,}\S"),
    "multi-line": re.compile(r"\n"),
    "non-ascii": re.compile(r"[^\x00-\x7f]"),
    "html-entity": re.compile(r"&(?:lt|gt|amp|quot|#\d+);"),
    "escaped-quote": re.compile(r"\\['\"]"),
}


def artifacts_of(text: str) -> list[str]:
    return [name for name, p in ARTIFACTS.items() if p.search(text)] or ["none-detected"]


def _tier(m: object) -> str:
    return getattr(m, "tier", "exact") or "exact"


def _blank() -> dict[str, int]:
    return {"lines": 0, "top1": 0, "top3": 0, "wrong_first": 0}


def load_index(kb_dir: Path | None) -> tuple[KbIndex, str]:
    """The index to measure: `kb_dir` compiled in memory, else the packaged bundle (or DENPEX_KB_BUNDLE); a
    stale packaged bundle falls back to compiling kb/ in memory (nothing is written)."""
    if kb_dir is None:
        try:
            index = default_index()
            return index, index.source if hasattr(index, "source") else "package"
        except ValueError as exc:
            print(f"packaged bundle unusable ({exc}); compiling kb/ in memory", file=sys.stderr)
            kb_dir = ROOT / "kb"
    return index_from_kb_dir(kb_dir, strict=False), f"{kb_dir} (compiled in memory)"


def measure(with_artifacts: bool = False, kb_dir: Path | None = None, fuzzy: bool = True) -> dict:
    index, source = load_index(kb_dir)
    known = set(index.by_id)
    examples = kb_examples(kb_dir or ROOT / "kb")
    rows = [json.loads(line) for line in HELDOUT.read_text(encoding="utf-8").splitlines() if line.strip()]

    dropped: Counter[str] = Counter()
    not_in_index = 0
    failure = {"lines": 0, "top1": 0, "top3": 0, "abstain": 0, "wrong_first": 0}
    failure_tier = {t: _blank() for t in TIERS}
    unknown = {"lines": 0, "abstain": 0, "answer": 0}
    unknown_tier = dict.fromkeys(TIERS, 0)
    benign = {"lines": 0, "fp": 0}
    benign_tier = dict.fromkeys(TIERS, 0)
    miss_artifacts: Counter[str] = Counter()
    hit_artifacts: Counter[str] = Counter()
    miss_kinds: Counter[str] = Counter()

    for row in rows:
        text, expected, kind = row["text"], row.get("expected"), row.get("kind")
        how = leak(text, examples)
        if how:
            dropped[how] += 1
            continue
        found = match(text, top=5, index=index, fuzzy=fuzzy)
        ids = [m.id for m in found]
        tier = _tier(found[0]) if found else None
        if kind == "benign":
            benign["lines"] += 1
            if found:
                benign["fp"] += 1
                benign_tier[tier] = benign_tier.get(tier, 0) + 1
            continue
        if isinstance(expected, str) and expected.startswith("unknown:"):
            unknown["lines"] += 1
            if found:
                unknown["answer"] += 1
                unknown_tier[tier] = unknown_tier.get(tier, 0) + 1
            else:
                unknown["abstain"] += 1
            continue
        if expected not in known:
            not_in_index += 1
            continue
        failure["lines"] += 1
        outcome = "abstain"
        if not found:
            failure["abstain"] += 1
        else:
            per = failure_tier.setdefault(tier, _blank())
            per["lines"] += 1
            if ids[0] == expected:
                failure["top1"] += 1
                per["top1"] += 1
                outcome = "top1"
            else:
                failure["wrong_first"] += 1
                per["wrong_first"] += 1
                outcome = "wrong_first"
            if expected in ids[:3]:
                failure["top3"] += 1
                per["top3"] += 1
        if with_artifacts:
            bucket = hit_artifacts if outcome == "top1" else miss_artifacts
            for a in artifacts_of(text):
                bucket[a] += 1
            if outcome != "top1":
                miss_kinds[outcome] += 1

    result = {
        "date": datetime.date.today().isoformat(),
        "commit": _commit(),
        "index": source,
        "fuzzy_and_evidence_tiers": fuzzy,
        "entries_in_index": len(known),
        "heldout_lines": len(rows),
        "dropped_as_examples": sum(dropped.values()),
        "dropped_by_rule": dict(dropped),
        "failure_expected_not_in_index": not_in_index,
        "failure": failure,
        "failure_by_tier": failure_tier,
        "unknown": unknown,
        "unknown_answered_by_tier": unknown_tier,
        "benign": benign,
        "benign_fp_by_tier": benign_tier,
    }
    if with_artifacts:
        result["artifacts"] = {
            "misses": dict(miss_kinds),
            "in_missed_failure_lines": dict(miss_artifacts.most_common()),
            "in_top1_failure_lines": dict(hit_artifacts.most_common()),
        }
    return result


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def _pct(n: int, d: int) -> str:
    return f"{n:>4} ({100 * n / d:5.1f}%)" if d else f"{n:>4} (   - )"


def table(r: dict) -> str:
    f = r["failure"]
    n = f["lines"]
    lines = [
        f"held-out accuracy  {r['date']}  commit {r['commit']}  index {r['index']} ({r['entries_in_index']} entries)"
        f"{'' if r['fuzzy_and_evidence_tiers'] else '  (signatures only: --no-fuzzy)'}",
        f"lines {r['heldout_lines']}; dropped as kb examples {r['dropped_as_examples']} {r['dropped_by_rule']}; "
        f"failure lines whose expected id is not in the index {r['failure_expected_not_in_index']}",
        "",
        "failure lines (expected id in the index)",
        f"  {'tier':<11} {'lines':>6} {'top-1 right':>14} {'top-3 right':>14} {'abstain':>14} {'wrong-first':>14}",
    ]
    for tier, per in r["failure_by_tier"].items():
        lines.append(
            f"  {tier:<11} {per['lines']:>6} {_pct(per['top1'], n):>14} {_pct(per['top3'], n):>14} {'':>14} "
            f"{_pct(per['wrong_first'], n):>14}"
        )
    lines.append(
        f"  {'overall':<11} {n:>6} {_pct(f['top1'], n):>14} {_pct(f['top3'], n):>14} {_pct(f['abstain'], n):>14} "
        f"{_pct(f['wrong_first'], n):>14}"
    )
    u, b = r["unknown"], r["benign"]
    lines += [
        "  (per-tier percentages are of all failure lines)",
        "",
        f"unknown:* lines {u['lines']}: abstain {_pct(u['abstain'], u['lines'])}, answer {_pct(u['answer'], u['lines'])}"
        f"  by tier {r['unknown_answered_by_tier']}",
        f"benign lines {b['lines']}: false positives {_pct(b['fp'], b['lines'])}  by tier {r['benign_fp_by_tier']}",
    ]
    if "artifacts" in r:
        a = r["artifacts"]
        lines += ["", f"failure lines not right at top-1: {a['misses']}", "  artifacts present (a line may show several):"]
        for name, count in a["in_missed_failure_lines"].items():
            lines.append(f"    {name:<16} {count:>4}   (in top-1 right lines: {a['in_top1_failure_lines'].get(name, 0)})")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument("--artifacts", action="store_true", help="aggregate artifact counts over the misses")
    ap.add_argument("--kb", type=Path, help="measure against this kb/ directory, compiled in memory")
    ap.add_argument("--no-fuzzy", action="store_true", help="signatures only: the exact and normalized tiers")
    args = ap.parse_args()
    r = measure(with_artifacts=args.artifacts, kb_dir=args.kb, fuzzy=not args.no_fuzzy)
    print(json.dumps(r, indent=2) if args.json else table(r))


if __name__ == "__main__":
    main()
