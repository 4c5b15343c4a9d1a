"""The generated part of CONTRIBUTING.md: the table of problem codes, written from denpex_kb/codes.py.

`python -m denpex_kb.contributing` rewrites the section between the two markers; with `--check` it changes
nothing and exits 1 when the section is out of date (the test suite runs the same comparison).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from .codes import CODES, CODES_PAGE
from .errors import DenpexError
from .paths import REPO_DIR
from .urls import HUB

CONTRIBUTING = REPO_DIR / "CONTRIBUTING.md"
BEGIN = "<!-- codes:begin (generated from denpex_kb/codes.py by `python -m denpex_kb.contributing`; do not edit) -->"
END = "<!-- codes:end -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def codes_table() -> str:
    # The published hub, not DENPEX_KB_HUB_URL: the committed file must not depend on who generated it.
    rows = [
        f"| [{c.code}]({HUB}{CODES_PAGE}#{c.anchor}) | `{c.name}` | {c.severity.value} "
        f"| {_cell(c.description)} | {_cell(c.fix)} |"
        for c in CODES
    ]
    return "| Code | Name | Severity | Meaning | Fix |\n|---|---|---|---|---|\n" + "\n".join(rows) + "\n"


def with_codes_table(text: str) -> str:
    """`text` with the section between the markers replaced by the current table."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise DenpexError(f"the markers of the generated code table are missing; put {BEGIN!r} and {END!r} around it")
    return text[: start + len(BEGIN)] + "\n" + codes_table() + text[end:]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m denpex_kb.contributing", description="Rewrite the code table of CONTRIBUTING.md.")
    parser.add_argument("path", nargs="?", type=Path, default=CONTRIBUTING, help="the file (default: %(default)s)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when the table is out of date")
    args = parser.parse_args(argv)
    text = args.path.read_text(encoding="utf-8")
    updated = with_codes_table(text)
    if updated == text:
        return 0
    if args.check:
        print(f"{args.path}: the code table is out of date; run `python -m denpex_kb.contributing`", file=sys.stderr)
        return 1
    args.path.write_text(updated, encoding="utf-8")
    print(f"rewrote the code table in {args.path}", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
