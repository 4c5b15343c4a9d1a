"""`denpex-kb compile`: rebuild the bundle shipped in the package, and the committed JSON Schema."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..paths import BUNDLE_DIR, REPO_DIR
from ._common import add_kb_option, kb_dir

ORDER = 60


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("compile", help="compile kb/ into the bundle shipped in the package, and export the schema")
    add_kb_option(p)
    p.add_argument("--out", metavar="DIR", help=f"bundle directory (default: {BUNDLE_DIR})")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..compiler import write_bundle
    from ..loader import load_kb
    from ..problems import Severity
    from ..schema import render, vocabulary_tags
    from ..validators import run_checks

    root = kb_dir(args)
    kb = load_kb(root)
    errors = [p for p in run_checks(kb) if p.severity is Severity.error]
    if errors:
        for p in errors:
            print(p.render(), file=sys.stderr)
        print("not compiled: fix the problems above first", file=sys.stderr)
        return 1
    out = Path(args.out) if args.out else BUNDLE_DIR
    for path in write_bundle(kb, out):
        print(f"wrote {path}", file=sys.stderr)
    schema_dir = REPO_DIR / "schema"
    if not args.out and schema_dir.is_dir():
        target = schema_dir / "entry.schema.json"
        target.write_text(render(vocabulary_tags(root)), encoding="utf-8")
        print(f"wrote {target}", file=sys.stderr)
    return 0
