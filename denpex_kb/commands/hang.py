"""`denpex-kb hang`: which rank never entered which collective, from PyTorch flight-recorder dumps."""

from __future__ import annotations

import argparse
import json
import sys

from ..cli import UsageError
from ..terminal import visible

ORDER = 22

def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "hang",
        help="name the rank a hung job waited for, from flight-recorder dumps (one per rank, or their directory)",
    )
    p.add_argument("dumps", nargs="+", metavar="DUMP", help="dump files (<prefix><rank>, pickle or JSON) or a directory of them")
    p.add_argument("--json", action="store_true", help="print the analysis as JSON")
    p.add_argument("--world-size", type=int, metavar="N",
                   help="the job's world size, when the dumps' pg_config does not say it (gloo) and the last ranks' dumps are missing")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..flight import paused_collector

    with paused_collector():  # the dumps are released when _run returns, before the collector is back on
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from .. import flight

    if args.world_size is not None and args.world_size < 1:
        raise UsageError("--world-size must be at least 1")
    paths = flight.expand_paths(args.dumps)
    if not paths:
        raise UsageError("no dump files given (the directory is empty)")
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise UsageError(f"no such file: {', '.join(missing)}")
    dumps, problems = flight.read_dumps(paths)
    analysis = flight.analyze(dumps, world_size=args.world_size, problems=problems)
    if args.json:
        json.dump(analysis.to_dict(), sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        for line in flight.format_text(analysis):
            print(visible(line))  # a dump is untrusted: no escape sequences reach the terminal
    for p in problems:
        print(f"denpex-kb hang: {visible(p)}", file=sys.stderr)
    if problems or not dumps:
        return 2  # unreadable input (the readable dumps were still analysed)
    if analysis.found:
        return 1
    # The buffers no longer overlap: no conclusion either way, which a scheduler must not read as healthy.
    return 3 if analysis.undecided else 0
