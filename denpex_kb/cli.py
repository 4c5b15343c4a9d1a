"""The `denpex-kb` command: a thin layer over the library. Each subcommand is a module in `commands/`."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from . import __version__, commands

EXIT_OK, EXIT_FOUND, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Bad arguments or unreadable input: exit code 2."""


# The commands a user types when a job has just died start without importing the others (the model,
# the loader, the site): a fresh `denpex-kb match` should cost little more than Python's own start-up.
HOT_PATH = {"match": "match_cmd", "scan": "scan_cmd"}


def _command_modules(only: str | None = None) -> list[ModuleType]:
    import importlib

    if only:
        names = [only]
    else:
        import pkgutil

        names = [m.name for m in pkgutil.iter_modules(commands.__path__) if not m.name.startswith("_")]
    modules = [importlib.import_module(f"{commands.__name__}.{name}") for name in names]
    return sorted(modules, key=lambda mod: getattr(mod, "ORDER", 99))


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter, sized without `shutil`: argparse builds a formatter for every option it registers and
    sizes it through `shutil.get_terminal_size`, whose import (bz2, lzma, fnmatch) every start would pay for."""

    def __init__(self, prog: str) -> None:
        columns = os.environ.get("COLUMNS", "")
        if not columns.isdigit() or int(columns) <= 0:  # as shutil does: COLUMNS, else the terminal, else 80
            stdout = sys.__stdout__
            try:
                columns = str(os.get_terminal_size(stdout.fileno()).columns) if stdout is not None else "80"
            except (OSError, ValueError):  # not a terminal, or stdout closed
                columns = "80"
        super().__init__(prog, width=max(int(columns) - 2, 20))


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    parser = _Parser(
        prog="denpex-kb",
        description="Name the failure behind an ML training error, and how to fix it. Runs locally; no log leaves the machine.",
    )
    parser.add_argument("--version", action="version", version=f"denpex-kb {__version__}")
    # An explicit prog spares argparse a help formatter (and its imports) on every start.
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", prog="denpex-kb")
    first = argv[0] if argv else None
    for module in _command_modules(HOT_PATH.get(first or "")):
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
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
