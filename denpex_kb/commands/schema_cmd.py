"""`denpex-kb schema`: print the JSON Schema of an entry file."""

from __future__ import annotations

import argparse
import sys

from ._common import add_kb_option, kb_dir

ORDER = 80


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("schema", help="print the JSON Schema of an entry file")
    add_kb_option(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..schema import render, vocabulary_tags

    sys.stdout.write(render(vocabulary_tags(kb_dir(args))))
    return 0
