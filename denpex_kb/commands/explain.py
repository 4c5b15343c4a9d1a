"""`denpex-kb explain ID`: an entry in the terminal, from the same renderer as its hub page."""

from __future__ import annotations

import argparse
import sys

from ..cli import UsageError
from ..terminal import visible
from ._common import add_kb_option, did_you_mean, load

ORDER = 25


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("explain", help="show an entry: causes, checklist, fix, commands")
    p.add_argument("id", metavar="ID")
    add_kb_option(p, runtime=True)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..bundle import default_index
    from ..model import Entry
    from ..site.render import to_terminal

    if args.kb:
        kb = load(args)
        entry = kb.entries.get(args.id)
        tombstone = kb.tombstones.get(args.id)
        replaced = tombstone.replaced_by if tombstone else None
        retired = tombstone is not None
        titles = {e.id: e.title for e in kb.entries.values()}
    else:
        index = default_index()
        data = index.full_entries.get(args.id)
        entry = Entry.model_validate(data) if data else None
        replaced = index.tombstones.get(args.id)
        retired = args.id in index.tombstones
        titles = {key: str(value.get("title", key)) for key, value in index.full_entries.items()}
    if entry is None:
        if retired:
            raise UsageError(visible(f"{args.id} was retired" + (f"; see {replaced}" if replaced else "")))
        close = did_you_mean(args.id, sorted(titles))
        raise UsageError(f"no entry {visible(repr(args.id))}{visible(close)}; `denpex-kb list` shows them all")
    sys.stdout.write(visible(to_terminal(entry, titles=titles), keep_newlines=True))
    return 0
