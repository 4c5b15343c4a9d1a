"""`denpex-kb fmt`: rewrite entry files in the canonical layout (key order, indentation, `|` blocks)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..cli import UsageError
from ..formatting import FormatError, format_text, read_text, write_atomic
from ..loader import display_path
from ..output import plural
from ..problems import Problem
from ..yamlio import YamlProblem
from ._common import add_kb_option, kb_dir

ORDER = 45


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("fmt", help="format entry files canonically (comments kept); --check only lists them")
    p.add_argument("paths", nargs="*", metavar="PATH", help="entry files or directories (default: every kb/*.yaml)")
    p.add_argument("--check", action="store_true", help="change nothing; list the files that would change and exit 1")
    add_kb_option(p)
    p.set_defaults(handler=run)


def entry_files(paths: list[str], args: argparse.Namespace) -> list[Path]:
    """The entry files to format. Support files (`_tags.yaml`) are skipped: they have no entry layout."""
    if not paths:
        return sorted(p for p in kb_dir(args).glob("*.yaml") if not p.name.startswith("_"))
    files: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            files.extend(sorted(p for p in path.glob("*.yaml") if not p.name.startswith("_")))
        elif path.is_file():
            if not path.name.startswith("_"):
                files.append(path)
        else:
            raise UsageError(f"{given}: no such file or directory")
    return files


def run(args: argparse.Namespace) -> int:
    files = entry_files(args.paths, args)
    changed: list[Path] = []
    failed = 0
    for path in files:
        shown = display_path(path)
        try:
            text = read_text(path)
            formatted = format_text(text)
        except (YamlProblem, FormatError) as exc:
            failed += 1
            print(Problem(shown, exc.line, exc.col, "DKB001", "fmt", f"{exc}; the file was left unchanged").render(), file=sys.stderr)
            continue
        except OSError as exc:
            failed += 1
            print(Problem(shown, 0, 0, "DKB001", "fmt", f"cannot read the file: {exc.strerror}").render(), file=sys.stderr)
            continue
        if formatted == text:
            continue
        changed.append(path)
        if args.check:
            print(f"would reformat {shown}")
            continue
        try:
            write_atomic(path, formatted)
        except OSError as exc:
            failed += 1
            print(f"{shown}: cannot write the file ({exc.strerror}); it was left unchanged", file=sys.stderr)
            continue
        print(f"reformatted {shown}")
    verb = "would be reformatted" if args.check else "reformatted"
    tail = f", {failed} could not be formatted" if failed else ""
    print(f"{len(changed)} of {plural(len(files), 'file')} {verb}{tail}", file=sys.stderr)
    if failed or (args.check and changed):
        return 1
    return 0
