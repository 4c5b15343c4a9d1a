"""Helpers shared by the subcommands."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ..cli import UsageError

if TYPE_CHECKING:  # the runtime path (match, scan) must not pay for the loader and the model
    from pathlib import Path

    from ..bundle import KbIndex
    from ..loader import KnowledgeBase


def add_kb_option(parser: argparse.ArgumentParser, *, runtime: bool = False) -> None:
    if runtime:
        text = "use this knowledge-base directory (compiled in memory) instead of the bundle shipped in the package"
    else:
        text = "knowledge-base directory (default: ./kb, else the entry sources shipped in the package)"
    parser.add_argument("--kb", metavar="DIR", help=text)


def kb_dir(args: argparse.Namespace) -> Path:
    from ..paths import find_kb_dir

    path = find_kb_dir(getattr(args, "kb", None))
    if path is None:
        raise UsageError("no knowledge base found; pass --kb DIR")
    if not path.is_dir():
        raise UsageError(f"{path}: not a directory")
    return path


def load(args: argparse.Namespace) -> KnowledgeBase:
    from ..loader import load_kb

    return load_kb(kb_dir(args))


def index(args: argparse.Namespace) -> KbIndex:
    """The compiled index: the packaged bundle, or `--kb DIR` compiled in memory."""
    from ..bundle import default_index, index_from_kb_dir

    if getattr(args, "kb", None):
        try:
            from pathlib import Path

            return index_from_kb_dir(Path(args.kb))
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    return default_index()
