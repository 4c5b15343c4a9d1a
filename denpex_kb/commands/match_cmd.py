"""`denpex-kb match`: name the failure behind a pasted line or block."""

from __future__ import annotations

import argparse
import sys

from ..cli import UsageError
from ..output import MATCH_FORMATS, MatchResult
from ._common import add_env_option, add_kb_option, env_versions, index

ORDER = 10
MAX_INPUT = 4 << 20
EXIT_OK, EXIT_FOUND = 0, 1
EXIT_HELP = (
    "Exit status: 0 when the text was read, whether or not a failure matched (with --exit-code: 0 no match, "
    "1 a failure matched, as `scan` exits); 2 a usage error or empty input."
)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("match", help="name the failure behind an error line (or a pasted block on stdin)", epilog=EXIT_HELP)
    p.add_argument("text", nargs="*", metavar="TEXT", help="the error text; '-' or nothing reads stdin")
    p.add_argument("--json", action="store_true", help='print {"query": ..., "matches": [...]}')
    p.add_argument("--top", type=int, default=5, metavar="N", help="at most N matches (default 5)")
    p.add_argument("--exit-code", action="store_true",
                   help="exit 1 when a failure matched, 0 when none did (as `scan` does); without it, 0 either way")
    add_kb_option(p, runtime=True)
    add_env_option(p)
    p.set_defaults(handler=run)


def read_query(parts: list[str]) -> str:
    if parts and parts != ["-"]:
        text = " ".join(parts)
        if not text.strip():
            raise UsageError("the error text is empty; give the line the software printed")
        return text
    if sys.stdin is None or sys.stdin.closed or sys.stdin.isatty():
        raise UsageError("give the error text as an argument, or pipe it on stdin")
    data = sys.stdin.buffer.read(MAX_INPUT + 1)
    if len(data) > MAX_INPUT:
        data = data[:MAX_INPUT]
        _warn(f"only the first {MAX_INPUT >> 20} MiB of stdin were read")
    if not data.strip():
        raise UsageError("stdin is empty; pipe the error text, or give it as an argument")
    return data.decode("utf-8", "replace")


def _warn(what: str) -> None:
    print(f"denpex-kb match: warning: {what}; for a whole log use `denpex-kb scan` (e.g. `denpex-kb scan -`)",
          file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    if args.top < 1:
        raise UsageError("--top must be at least 1")
    from ..matcher import match

    query = read_query(args.text)
    from ..matcher import MAX_BLOCK_LINES

    lines = query.count("\n") + 1  # cheap first; splitlines (as the matcher does) only when it may matter
    if lines > MAX_BLOCK_LINES or (len(query) > MAX_BLOCK_LINES and len(query.splitlines()) > MAX_BLOCK_LINES):
        _warn(f"only the first {MAX_BLOCK_LINES:,} lines of {len(query.splitlines()):,} are matched")
    results = match(query, top=args.top, index=index(args), versions=env_versions(args))
    MATCH_FORMATS.write("json" if args.json else "text", MatchResult(query, results))
    return EXIT_FOUND if results and args.exit_code else EXIT_OK
