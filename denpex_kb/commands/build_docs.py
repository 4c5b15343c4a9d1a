"""`denpex-kb build-docs`: render every entry, write the completed config, and build the hub (strict) with mkdocs
or Zensical."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..cli import UsageError
from ..output import plural
from ..site.config import BUILDERS
from ._common import add_kb_option, kb_dir, shipped_kb

ORDER = 70


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("build-docs", help="build the failure hub (static site) from the knowledge base")
    add_kb_option(p)
    p.add_argument("--out", metavar="DIR", default="site", help="where the built site goes (default: ./site)")
    p.add_argument("--docs", metavar="DIR",
                   help="where the generated pages and config go (default: docs/ beside mkdocs.yml; emptied first)")
    p.add_argument("--config", metavar="FILE", help="the committed mkdocs config (default: mkdocs.yml beside kb/)")
    p.add_argument("--builder", choices=BUILDERS, default="mkdocs",
                   help="the site builder; both read the generated DIR/mkdocs.yml (default: mkdocs)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    try:
        from ..site.build import build_site
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise UsageError(f"the site needs the docs extra: pip install 'denpex-kb[docs]' ({exc})") from None
    from ..loader import load_kb
    from ..problems import ProblemSeverity
    from ..validators import run_checks

    root = kb_dir(args)
    # Before the checks, which take a while: the hub needs a checkout's mkdocs.yml (and its theme overrides).
    if not args.config and not (root.resolve().parent / "mkdocs.yml").is_file():
        where = ("the knowledge base in use is the copy inside the installed package, with no mkdocs.yml beside it"
                 if shipped_kb(root) else f"no mkdocs.yml beside {root}")
        raise UsageError(f"the hub is built from a checkout of the repository (kb/, mkdocs.yml, site_overrides/): {where}; "
                         "run it in a checkout, or pass --config FILE (and --kb DIR)")
    kb = load_kb(root)
    errors = [p for p in run_checks(kb) if p.severity is ProblemSeverity.error]
    if errors:
        for p in errors:
            print(p.render(), file=sys.stderr)
        return 1
    config = Path(args.config) if args.config else kb.root.resolve().parent / "mkdocs.yml"
    if not config.is_file():
        raise UsageError(f"{config}: no mkdocs config; pass --config")
    docs = Path(args.docs) if args.docs else config.parent / "docs"
    try:
        generated = build_site(kb, config, docs, Path(args.out), builder=args.builder)
    except Exception as exc:  # noqa: BLE001 - mkdocs aborts with its own exception types on strict warnings
        print(f"denpex-kb build-docs: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(f"built {plural(len(kb.entries), 'entry', 'entries')} into {args.out} with {args.builder} "
          f"(config: {generated})", file=sys.stderr)
    return 0
