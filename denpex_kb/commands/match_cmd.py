"""`denpex-kb match`: name the failure behind a pasted line or block."""

from __future__ import annotations

import argparse
import json
import sys

from ..cli import UsageError
from ..terminal import json_safe, visible
from ._common import add_kb_option, index

ORDER = 10
MAX_INPUT = 4 << 20


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("match", help="name the failure behind an error line (or a pasted block on stdin)")
    p.add_argument("text", nargs="*", metavar="TEXT", help="the error text; '-' or nothing reads stdin")
    p.add_argument("--json", action="store_true", help='print {"query": ..., "matches": [...]}')
    p.add_argument("--top", type=int, default=5, metavar="N", help="at most N matches (default 5)")
    add_kb_option(p, runtime=True)
    p.set_defaults(handler=run)


def read_query(parts: list[str]) -> str:
    if parts and parts != ["-"]:
        return " ".join(parts)
    if sys.stdin is None or sys.stdin.closed or sys.stdin.isatty():
        raise UsageError("give the error text as an argument, or pipe it on stdin")
    data = sys.stdin.buffer.read(MAX_INPUT + 1)
    if len(data) > MAX_INPUT:
        data = data[:MAX_INPUT]
        _warn(f"only the first {MAX_INPUT >> 20} MiB of stdin were read")
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
    results = match(query, top=args.top, index=index(args))
    if args.json:
        print(json_safe(json.dumps({"query": query, "matches": [r.to_dict() for r in results]}, indent=2, ensure_ascii=False)))
        return 0
    if not results:
        print("No known failure matches this text.")
        print("If it is a real failure, report it: https://github.com/denpex-kb/denpex-kb/issues/new?template=missing-failure.yml")
        return 0
    for n, r in enumerate(results):
        if n:
            print()
        v = visible
        print(f"{v(r.id)}  ({v(r.phase)}, score {r.score})  {v(r.title)}")
        print(f"  matched: {v(r.line[:300])}")
        values = {k: val for k, val in r.values.items() if k != "exception"}
        if values:
            print("  values:  " + ", ".join(f"{v(k)}={v(val)}" for k, val in sorted(values.items())))
        print(f"  fix:     {v(r.fix)}")
        if r.retry:
            print(f"  retry:   {v(r.retry)} (blame: {v(r.blame)})")
        print(f"  more:    {v(r.url)}  (or: denpex-kb explain {v(r.id)})")
    return 0
