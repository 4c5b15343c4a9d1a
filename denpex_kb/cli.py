"""The `denpex-kb` command: a thin layer over the library. Each subcommand is a module in `commands/`."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from . import __version__, commands

EXIT_OK, EXIT_FOUND, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Bad arguments or unreadable input: exit code 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="denpex-kb",
        description="Name the failure behind an ML training error, and how to fix it. Runs locally; no log leaves the machine.",
    )
    parser.add_argument("--version", action="version", version=f"denpex-kb {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    modules = sorted(
        (
            importlib.import_module(f"{commands.__name__}.{m.name}")
            for m in pkgutil.iter_modules(commands.__path__)
            if not m.name.startswith("_")
        ),
        key=lambda mod: getattr(mod, "ORDER", 99),
    )
    for module in modules:
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(args.handler(args))
    except UsageError as exc:
        print(f"denpex-kb {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # `denpex-kb list | head`: the reader went away; that is not an error.
        sys.stderr.close()
        return EXIT_OK
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
