"""`denpex-kb list`: every entry of the knowledge base."""

from __future__ import annotations

import argparse
import json

from ..terminal import json_safe, visible
from ._common import add_kb_option, index

ORDER = 30


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("list", help="list every entry")
    add_kb_option(p, runtime=True)
    p.add_argument("--json", action="store_true", help="print a JSON array")
    from ..model import Phase  # loaded anyway: `list` is off the hot path, where every command registers

    # The same choices as `new --phase`: an unknown phase is a usage error, not an empty list.
    p.add_argument("--phase", choices=[ph.value for ph in Phase], help="only entries of this phase")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    idx = index(args)
    rows = [e for e in idx.entries if not args.phase or e.phase == args.phase]
    if args.json:
        out = [
            {"id": e.id, "title": e.title, "phase": e.phase, "severity": e.severity, "tags": list(e.tags), "status": e.status,
             "retry": e.retry, "blame": e.blame, "url": e.url, "pack": e.pack}
            for e in rows
        ]
        print(json_safe(json.dumps(out, indent=2, ensure_ascii=False)))
        return 0
    width = max((len(visible(e.id)) for e in rows), default=10)
    for e in sorted(rows, key=lambda e: (e.phase, e.id)):
        pack = f"  [pack {visible(e.pack)}]" if e.pack else ""
        print(f"{visible(e.id):<{width}}  {visible(e.phase):<15} {visible(e.title)}{pack}")
    return 0
