"""`denpex-kb new`: scaffold kb/<id>.yaml, optionally from a pasted error line."""

from __future__ import annotations

import argparse
import sys

from ..cli import UsageError
from ..formatting import write_atomic
from ..loader import display_path, load_kb
from ..model import Phase
from ..scaffold import check_id, derive_id, placeholders, propose, render, similar_entries
from ..yamlio import load_text
from ._common import add_kb_option, kb_dir

ORDER = 40


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("new", help="scaffold a new entry file, optionally from a pasted error line")
    p.add_argument("id", nargs="?", metavar="ID", help="the new entry's id (default: derived from --from-text)")
    p.add_argument("--phase", choices=[ph.value for ph in Phase], help="where in the job's life the failure surfaces")
    p.add_argument("--from-text", metavar="LINE", help="the error line as the software printed it ('-' reads stdin)")
    add_kb_option(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    root = kb_dir(args)
    kb = load_kb(root)
    raw = sys.stdin.read() if args.from_text == "-" else args.from_text
    proposal = None
    if raw is not None:
        try:
            proposal = propose(raw)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    entry_id = args.id
    if entry_id is None:
        if proposal is None:
            raise UsageError("give the new entry's ID, or --from-text with the error line to derive one from")
        entry_id = derive_id(proposal.text)
        if not entry_id:
            raise UsageError("no id can be derived from the line; give one: denpex-kb new ID --from-text ...")
    if proposal is not None:
        # Before the id check: a refused derived id is often the known failure this warning names.
        for other, score in similar_entries(proposal.text, kb):
            print(f"warning: this looks like {other} ({score}%); run `denpex-kb match` first", file=sys.stderr)
    reason = check_id(entry_id, kb)
    if reason:
        raise UsageError(reason)
    for warning in proposal.warnings if proposal else []:
        print(f"warning: {warning}", file=sys.stderr)

    text = render(entry_id, Phase(args.phase) if args.phase else None, proposal, kb)
    path = root / f"{entry_id}.yaml"
    write_atomic(path, text)
    shown = display_path(path)
    print(f"created {shown}" + (f" (id derived from the line: {entry_id})" if args.id is None else ""))
    if proposal is not None:
        print(f"proposed signature: {proposal.template}")
    todo = placeholders(load_text(text))
    print(f"fill in {'this place' if len(todo) == 1 else f'these {len(todo)} places'}, then run `denpex-kb fmt` and `denpex-kb check`:")
    for loc, line, col in todo:
        print(f"  {shown}:{line}:{col}: {'.'.join(str(p) for p in loc)}")
    return 0
