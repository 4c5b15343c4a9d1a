"""An analysis as the lines `hang` prints and a scan report folds in."""

from __future__ import annotations

from typing import Any

from .analysis import Analysis, Hang, Mismatch, group_label, ranks_phrase, ranks_text, stamp
from .dump import Entry


def _entry_text(e: Entry) -> str:
    where = e.where()
    return (f"{e.op} (p2p #{e.seq})" if e.is_p2p else f"{e.op} #{e.seq}") + (f" at {where}" if where else "") + (f" ({group_label(e.group, e.desc)})" if e.group != "0" else "")


def hang_lines(h: Hang) -> list[str]:
    label = h.label
    op = f"{h.op or 'op'} (p2p #{h.seq_id})" if h.p2p else f"{h.op or 'op'} #{h.seq_id}"
    since = stamp(h.since_ns)
    waited = f"{len(h.waiting_ranks)} rank{'s' if len(h.waiting_ranks) != 1 else ''} waited" + (f" since {since}" if since else "")
    lines: list[str] = []
    seen = [r for r in h.missing_ranks if r not in h.absent_dumps]
    if h.absent_dumps and not seen:
        lines.append(f"no dump from {ranks_phrase(h.absent_dumps)}; {ranks_phrase(h.waiting_ranks)} {'all ' if len(h.waiting_ranks) > 1 else ''}"
                     f"wait{'s' if len(h.waiting_ranks) == 1 else ''} in {op} of {label}, so {ranks_phrase(h.absent_dumps)} "
                     f"never arrived; {waited}")
        if h.caveat:
            lines.append(f"  caveat: {h.caveat}")
    elif seen:
        lines.append(f"{ranks_phrase(seen)} never entered {op} ({label}); {waited}" +
                     (f"; no dump from {ranks_phrase(h.absent_dumps)}" if h.absent_dumps else ""))
    else:
        lines.append(f"every member of {label} entered {op} and none completed it; {waited}")
    for r in seen:
        last = h.last_entries.get(r) or []
        if last:
            lines.append(f"  rank {r}'s last collective: {_entry_text(last[-1])}")
            for e in reversed(last[:-1]):
                lines.append(f"    before it: {_entry_text(e)}")
        else:
            lines.append(f"  rank {r}'s dump holds no entry")
    sites = sorted({w for w in h.where.values() if w})
    if sites:
        lines.append(f"  the waiting ranks called it at {', '.join(sites)}")
    if h.note and not (h.absent_dumps and not seen):
        lines.append(f"  note: {h.note}")
    return lines


def mismatch_lines(m: Mismatch) -> list[str]:
    label = group_label(m.group, m.desc)
    kind = "p2p" if m.p2p else "collective"
    out = [f"mismatch in {label} {kind} #{m.seq_id}: different {m.what}"]
    for s in m.sides:
        detail = s["op"]
        if m.what in ("sizes", "dtypes", "op"):
            detail += f" in {s['input_sizes']} {s['input_dtypes'] or ''}".rstrip()
        where = sorted({w for w in s["where"].values() if w})
        out.append(f"  {ranks_phrase(s['ranks'])}: {detail}" + (f" at {', '.join(where)}" if where else ""))
    return out


def format_text(a: Analysis) -> list[str]:
    lines: list[str] = []
    for h in a.hangs:
        lines.extend(hang_lines(h))
    for m in a.mismatches:
        lines.extend(mismatch_lines(m))
    if not a.found and a.undecided:
        lines.append(f"cannot name a hang in {', '.join(a.undecided)}: the ring buffers no longer overlap (see the note)")
    elif not a.found:
        n = len(a.dumps)
        lines.append(f"no hang found in {n} dump{'s' if n != 1 else ''}" +
                     (f" (ranks {ranks_text([d.rank for d in a.dumps])})" if n else ""))
    for p in a.problems:
        lines.append(f"note: {p}")
    return lines


def fold_into_report(report: Any, analysis: Analysis) -> list[str]:
    """The lines a scan report shows for the flight-recorder dumps of the same job.

    `report` is a `ScanReport` (only read: its findings' ranks tie the log to the dumps); nothing is changed.
    """
    if not analysis.found and not analysis.problems:
        return []
    lines = ["Flight recorder"]
    lines.extend("  " + line for line in format_text(analysis))
    culprits = sorted({r for h in analysis.hangs for r in h.missing_ranks})
    findings = list(getattr(report, "findings", None) or [])
    if culprits and findings:
        timeouts = sorted({r for f in findings if f.id and "timeout" in f.id for r in (f.ranks or [f.rank]) if r is not None})
        waiting = sorted({r for h in analysis.hangs for r in h.waiting_ranks})
        if timeouts and set(timeouts) <= set(waiting):
            lines.append(f"  the watchdog timeouts on rank(s) {ranks_text(timeouts)} are the fallout: they waited for "
                         f"rank(s) {ranks_text(culprits)}")
        initiating = getattr(report, "initiating", None)
        if initiating is not None and initiating.rank in culprits:
            lines.append(f"  rank {initiating.rank}'s own failure ({initiating.id or initiating.exception}) is why it never arrived")
    return lines
