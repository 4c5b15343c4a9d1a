"""`denpex-kb check`: the schema, every validator and the example tests over the knowledge base."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ..output import CHECK_FORMATS, CheckResult
from ._common import add_kb_option, load

if TYPE_CHECKING:
    from ..problems import Problem

ORDER = 50


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("check", help="validate the knowledge base (schema, cross-entry checks, examples)")
    add_kb_option(p)
    p.add_argument("--format", choices=CHECK_FORMATS.names, default="text", help=CHECK_FORMATS.describe())
    p.add_argument("--no-examples", action="store_true", help="skip running the entries' examples")
    p.add_argument("--no-packs", action="store_true",
                   help="leave out the installed packs (by default their entries are checked with the knowledge base's)")
    p.set_defaults(handler=run)


def collect(args: argparse.Namespace) -> tuple[list[Problem], int]:
    from ..problems import ProblemSeverity
    from ..validators import run_checks

    kb = load(args, packs=not args.no_packs)
    problems = run_checks(kb)
    if not args.no_examples and not any(p.severity is ProblemSeverity.error for p in problems):
        from ..examples import example_problems

        problems.extend(example_problems(kb))
    return problems, len(kb.read)


def run(args: argparse.Namespace) -> int:
    problems, files = collect(args)
    result = CheckResult(problems, files)
    CHECK_FORMATS.write(args.format, result)
    return 1 if result.errors else 0
