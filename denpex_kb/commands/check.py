"""`denpex-kb check`: the schema, every validator and the example tests over the knowledge base."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING
from xml.etree import ElementTree as ET

from ._common import add_kb_option, load

if TYPE_CHECKING:
    from ..problems import Problem

ORDER = 50


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("check", help="validate the knowledge base (schema, cross-entry checks, examples)")
    add_kb_option(p)
    p.add_argument("--format", choices=("text", "json", "junit"), default="text")
    p.add_argument("--no-examples", action="store_true", help="skip running the entries' examples")
    p.set_defaults(handler=run)


def collect(args: argparse.Namespace) -> tuple[list[Problem], int]:
    from ..problems import Severity
    from ..validators import run_checks

    kb = load(args)
    problems = run_checks(kb)
    if not args.no_examples and not any(p.severity is Severity.error for p in problems):
        from ..testing import example_problems

        problems.extend(example_problems(kb))
    return problems, len(kb.files)


def junit(problems: list[Problem], suite_name: str) -> str:
    suite = ET.Element("testsuite", name=suite_name, tests=str(max(len(problems), 1)), failures=str(len(problems)))
    if not problems:
        ET.SubElement(suite, "testcase", classname=suite_name, name="knowledge-base")
    for p in problems:
        case = ET.SubElement(suite, "testcase", classname=p.path, name=f"{p.code} {p.check} line {p.line}")
        failure = ET.SubElement(case, "failure", message=p.message, type=p.code)
        failure.text = p.render()
    return ET.tostring(suite, encoding="unicode") + "\n"


def run(args: argparse.Namespace) -> int:
    from ..problems import Severity

    problems, files = collect(args)
    errors = sum(p.severity is Severity.error for p in problems)
    if args.format == "json":
        print(json.dumps({"files": files, "errors": errors, "problems": [p.to_dict() for p in problems]}, indent=2))
    elif args.format == "junit":
        sys.stdout.write(junit(problems, "denpex-kb check"))
    else:
        for p in problems:
            print(p.render())
        warnings = len(problems) - errors
        print(f"{files} files checked: {errors} errors, {warnings} warnings", file=sys.stderr)
    return 1 if errors else 0
