"""`denpex-kb compile`: rebuild the bundle shipped in the package, and the committed JSON Schema."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import paths
from ..cli import UsageError
from ..paths import BUNDLE_DIR
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
    from ..problems import ProblemSeverity
    from ..schema import render, vocabulary_tags
    from ..validators import run_checks

    root = kb_dir(args)
    if not args.out and not (paths.REPO_DIR / "kb" / "_tags.yaml").is_file():
        # Installed, not a checkout: the default target is the installed package's own data directory.
        raise UsageError("compile rebuilds the bundle of a checkout of the repository (kb/ beside denpex_kb/); "
                         "this denpex-kb is an installed package. Run it in a checkout, or give --out DIR "
                         "(and --kb DIR for entries of your own)")
    kb = load_kb(root)
    errors = [p for p in run_checks(kb) if p.severity is ProblemSeverity.error]
    if errors:
        for p in errors:
            print(p.render(), file=sys.stderr)
        print("not compiled: fix the problems above first", file=sys.stderr)
        return 1
    out = Path(args.out) if args.out else paths.BUNDLE_DIR
    for path in write_bundle(kb, out):
        print(f"wrote {path}", file=sys.stderr)
    schema_dir = paths.REPO_DIR / "schema"
    if not args.out and schema_dir.is_dir():
        target = schema_dir / "entry.schema.json"
        target.write_text(render(vocabulary_tags(root)), encoding="utf-8")
        print(f"wrote {target}", file=sys.stderr)
    return 0
