"""Calibrating the fuzzy tier's threshold on the knowledge base itself, never on held-out text.

    python benchmarks/accuracy/calibrate.py          # a table of thresholds
    python benchmarks/accuracy/calibrate.py --json

Positives (leave-one-out): each real example line that an entry's signature matches, asked of the fuzzy index
with that example's own skeletons and the skeleton of every signature that matches the line left out: "had this
wording no signature, would the fuzzy tier still name the entry?" Negatives: every line of the benign corpus
(`tests/corpus/benign/*.log`), and every `no_match` example that no signature matches (a fuzzy hit on the
entry it is a look-alike of is a false positive; a hit on another entry is counted apart, since many no_match
examples are a sibling failure that the fuzzy tier may rightly name).

The threshold in `denpex_kb/fuzzy.py` is the lowest one at which no negative is answered.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import re2

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from denpex_kb.bundle import _RE2_OPTIONS  # noqa: E402
from denpex_kb.compiler import index_from_kb_dir  # noqa: E402
from denpex_kb.fuzzy import THRESHOLD, comparable, informational, skeleton  # noqa: E402
from denpex_kb.loader import load_kb  # noqa: E402
from denpex_kb.matcher import match  # noqa: E402
from denpex_kb.normalize import strip_prefixes  # noqa: E402
from denpex_kb.signatures import compile_signature  # noqa: E402

STEPS = [float(t) for t in range(60, 100, 2)]


def best(fz, raw: str, exclude: frozenset[int]) -> tuple[int | None, float]:
    """The entry the fuzzy tier would name at any threshold, and its score (margin rule applied)."""
    if informational(raw):
        return None, 0.0
    sk = skeleton(raw)
    if not comparable(sk):
        return None, 0.0
    found = fz.answer(sk, exclude, threshold=0.0)
    return (fz.known[found[0]].entry, found[1]) if found else (None, 0.0)


def measure(kb_dir: Path) -> dict:
    kb = load_kb(kb_dir)
    index = index_from_kb_dir(kb_dir, strict=False)
    fz = index.fuzzy
    position = {e.id: k for k, e in enumerate(index.entries)}
    positives: list[tuple[int, int | None, float]] = []  # (expected entry, predicted, score)
    for entry_id in sorted(kb.entries):
        if entry_id not in position:
            continue
        entry, me = kb.entries[entry_id], position[entry_id]
        patterns = [re2.compile(compile_signature(s).pattern, _RE2_OPTIONS) for s in entry.signatures]
        for n, example in enumerate(entry.examples.match):
            for raw in example.text.splitlines():
                line = strip_prefixes(raw).text
                hit_sigs = {f"signature:{j}" for j, p in enumerate(patterns) if p.search(line)}
                if not hit_sigs:
                    continue
                exclude = frozenset(
                    k for k, known in enumerate(fz.known)
                    if known.entry == me and (known.origin == f"example:{n}" or known.origin in hit_sigs)
                )
                predicted, score = best(fz, raw, exclude)
                if comparable(skeleton(raw)):
                    positives.append((me, predicted, score))
                break  # one line per example: the first the entry's signatures match
    benign: list[float] = []
    for log in sorted((ROOT / "tests" / "corpus" / "benign").glob("*.log")):
        for raw in log.read_text(encoding="utf-8", errors="replace").splitlines():
            if match(raw, index=index, fuzzy=False):
                continue
            benign.append(best(fz, raw, frozenset())[1])
    own: list[float] = []
    other: list[float] = []
    for entry_id in sorted(kb.entries):
        if entry_id not in position:
            continue
        for example in kb.entries[entry_id].examples.no_match:
            if match(example.text, index=index, fuzzy=False):
                continue
            for raw in example.text.splitlines():
                predicted, score = best(fz, raw, frozenset())
                (own if predicted == position[entry_id] else other).append(score)
    rows = []
    for t in STEPS:
        answered = [(e, p) for e, p, s in positives if s >= t]
        rows.append({
            "threshold": t,
            "dev_lines": len(positives),
            "dev_right": sum(1 for e, p in answered if e == p),
            "dev_wrong": sum(1 for e, p in answered if e != p),
            "benign_lines": len(benign),
            "benign_answered": sum(1 for s in benign if s >= t),
            "no_match_own": sum(1 for s in own if s >= t),
            "no_match_other_entry": sum(1 for s in other if s >= t),
        })
    return {"threshold_in_use": THRESHOLD, "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--kb", type=Path, default=ROOT / "kb")
    args = ap.parse_args()
    r = measure(args.kb)
    if args.json:
        print(json.dumps(r, indent=2))
        return
    print(f"fuzzy threshold in use: {r['threshold_in_use']}")
    print(f"{'threshold':>9} {'dev right':>10} {'dev wrong':>10} {'benign':>8} {'no_match own':>13} {'other':>6}")
    for row in r["rows"]:
        n = row["dev_lines"]
        print(f"{row['threshold']:>9.0f} {row['dev_right']:>5}/{n:<4} {row['dev_wrong']:>10} "
              f"{row['benign_answered']:>4}/{row['benign_lines']:<4} {row['no_match_own']:>13} "
              f"{row['no_match_other_entry']:>6}")


if __name__ == "__main__":
    main()
