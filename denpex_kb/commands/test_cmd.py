"""`denpex-kb test`: run every entry's examples (and the benign corpus) through the matcher."""

from __future__ import annotations

import argparse
import json
import sys

from ..cli import UsageError
from ._common import add_kb_option, load

ORDER = 55


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("test", help="run the entries' examples and the benign corpus through the matcher")
    p.add_argument("ids", nargs="*", metavar="ID", help="only these entries (default: all, plus the benign corpus)")
    add_kb_option(p)
    p.add_argument("--format", choices=("text", "json", "junit"), default="text")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..bundle import index_from_kb_dir
    from ..testing import benign_problems, find_benign_dir, outcome_problems, run_examples
    from .check import junit

    kb = load(args)
    unknown = [i for i in args.ids if i not in kb.entries]
    if unknown:
        raise UsageError(f"no such entry: {', '.join(unknown)}")
    index = index_from_kb_dir(kb.root, strict=False)
    results = run_examples(kb, index, args.ids or None)
    problems = outcome_problems(kb, results)
    benign = find_benign_dir(kb.root) if not args.ids else None
    if benign is not None:
        problems.extend(benign_problems(kb, index, benign))
    if args.format == "json":
        out = {
            "entries": [
                {
                    "id": r.id,
                    "true_positives": r.true_positives,
                    "false_negatives": r.false_negatives,
                    "false_positives": r.false_positives,
                    "failures": [
                        {"kind": o.kind, "example": o.number + 1, "text": o.text, "expected": o.expected, "reported": o.reported}
                        for o in r.outcomes
                        if not o.ok
                    ],
                }
                for r in results
            ],
            "problems": [p.to_dict() for p in problems],
        }
        print(json.dumps(out, indent=2, ensure_ascii=False))
    elif args.format == "junit":
        sys.stdout.write(junit(problems, "denpex-kb test"))
    else:
        for r in results:
            mark = "ok  " if r.ok else "FAIL"
            print(f"{mark} {r.id}: {r.true_positives} true positives, {r.false_negatives} false negatives, {r.false_positives} false positives")
            for o in r.outcomes:
                if not o.ok:
                    text = o.text.strip().splitlines()[0][:100] if o.text.strip() else ""
                    if o.kind == "match":
                        print(f"       expected {o.expected}, reported {o.reported or 'nothing'}: {text}")
                    else:
                        print(f"       no_match example matched {o.reported}: {text}")
        for p in problems:
            if p.code in ("DKB204", "DKB205"):
                print(p.render())
        failed = sum(not r.ok for r in results)
        print(f"{len(results)} entries tested, {failed} failing; {len(problems)} problems", file=sys.stderr)
    return 1 if problems else 0
