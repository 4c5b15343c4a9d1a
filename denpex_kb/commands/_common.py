"""Helpers shared by the subcommands."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..bundle import KbIndex, default_index, index_from_kb_dir
from ..cli import UsageError
from ..loader import KnowledgeBase, load_kb
from ..paths import find_kb_dir


def add_kb_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kb", metavar="DIR", help="knowledge-base directory (default: ./kb, else the one shipped in the package)")


def kb_dir(args: argparse.Namespace) -> Path:
    path = find_kb_dir(getattr(args, "kb", None))
    if path is None:
        raise UsageError("no knowledge base found; pass --kb DIR")
    if not path.is_dir():
        raise UsageError(f"{path}: not a directory")
    return path


def load(args: argparse.Namespace) -> KnowledgeBase:
    return load_kb(kb_dir(args))


def index(args: argparse.Namespace) -> KbIndex:
    """The compiled index: the packaged bundle, or `--kb DIR` compiled in memory."""
    if getattr(args, "kb", None):
        try:
            return index_from_kb_dir(Path(args.kb))
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    return default_index()
