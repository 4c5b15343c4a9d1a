"""`denpex-kb test`: run every entry's examples (and the benign corpus) through the matcher."""

from __future__ import annotations

import argparse

from ..cli import UsageError
from ..output import TEST_FORMATS, TestResult
from ._common import add_kb_option, did_you_mean, load

ORDER = 55


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("test", help="run the entries' examples and the benign corpus through the matcher")
    p.add_argument("ids", nargs="*", metavar="ID", help="only these entries (default: all, plus the benign corpus)")
    add_kb_option(p)
    p.add_argument("--format", choices=TEST_FORMATS.names, default="text", help=TEST_FORMATS.describe())
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..compiler import index_from_kb_dir
    from ..examples import BENIGN_CODES, benign_problems, find_benign_dir, outcome_problems, run_examples

    kb = load(args)
    unknown = [i for i in args.ids if i not in kb.entries]
    if unknown:
        raise UsageError(f"no such entry: {', '.join(unknown)}{did_you_mean(unknown[0], sorted(kb.entries))}")
    index = index_from_kb_dir(kb.root, strict=False)
    results = run_examples(kb, index, args.ids or None)
    problems = outcome_problems(kb, results)
    benign = find_benign_dir(kb.root) if not args.ids else None
    if benign is not None:
        problems.extend(benign_problems(kb, index, benign))
    TEST_FORMATS.write(args.format, TestResult(results, problems, BENIGN_CODES))
    return 1 if problems else 0
