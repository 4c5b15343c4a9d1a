"""Causality: which finding of a scan started it all, and the notes that help read the rest.

The earliest root cause the knowledge base knows (a rank's own error file first; a signature's answer before a
fuzzy one; across files, by time when every candidate carries a timestamp); else the earliest exception no entry
knows; else the most telling piece of fallout. Exit codes in launcher summaries are read as signals.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .exitcodes import LAUNCHER_EXITS
from .normalize import safe_int
from .verdict import parse_stamp

if TYPE_CHECKING:
    from .bundle import KbIndex
    from .report import Finding

# What a negative exit code in a launcher summary says: the signal that ended the rank, and the entry that
# usually explains it.
# Each code's signal name, the entry it most often means, and what it means (exitcodes.py holds the one table).
EXIT_SIGNALS: dict[int, tuple[str, str | None, str]] = {
    code: (row.signal, row.likely, row.meaning) for code, row in LAUNCHER_EXITS.items()
}


def _earliest(findings: list[Finding]) -> Finding:
    """The first of `findings` in time when they come from several files and every one carries a timestamp;
    otherwise the first in reading order (files in the order given, per-rank files sorted, so rank order)."""
    if len({f.file for f in findings}) > 1:
        stamps = [parse_stamp(f.stamp) for f in findings]
        if all(stamp is not None for stamp in stamps):
            try:
                return min(zip(stamps, findings, strict=True), key=lambda sf: (sf[0], sf[1].order))[1]
            except TypeError:  # aware and naive stamps mixed: no order between them
                pass
    return findings[0]


def untimed_across_files(findings: list[Finding]) -> bool:
    """Whether root-cause candidates from several files lack the timestamps needed to order them in time."""
    candidates = [f for f in findings if f.signature_role == "initiating" and not f.before_job]
    return len({f.file for f in candidates}) > 1 and any(parse_stamp(f.stamp) is None for f in candidates)


def choose_initiating(findings: list[Finding], index: KbIndex) -> Finding | None:
    # The earliest root cause the knowledge base knows; else the earliest exception from a traceback; else
    # the most telling piece of fallout (launcher summaries last, since they only say that a child died).
    current = [f for f in findings if not f.before_job] or findings
    # What a rank wrote into its TorchElastic error file is its own account of its failure: it comes first.
    recorded = [f for f in current if f.values.get("error_file") and f.signature_role == "initiating"]
    if recorded:
        return _earliest(recorded)
    known = [f for f in current if f.id and f.signature_role == "initiating"]
    # A root cause a signature names comes before one only the fuzzy or evidence tier named: a wrapper line
    # ("Caught RuntimeError in DataLoader worker process 0") printed first must not displace the real error.
    named = [f for f in known if f.tier not in ("fuzzy", "evidence")]
    if named or known:
        return _earliest(named or known)
    unknown = [f for f in current if f.id is None]
    if unknown:
        return _earliest(unknown)
    if not current:
        return None
    findings = current

    def launcher(f: Finding) -> bool:
        info = index.by_id.get(f.id or "")
        return bool(info and "launcher" in info.tags)

    return sorted(findings, key=lambda f: (launcher(f), f.order))[0]


def hints_for(findings: list[Finding], initiating: Finding | None, index: KbIndex) -> list[str]:
    hints: list[str] = []
    if initiating is not None and initiating.fallout_only:  # what caused it was printed elsewhere
        hints.append(f"this log shows no root cause, only fallout: {initiating.id} follows a failure or a hang "
                     "elsewhere; scan the other ranks' and nodes' logs with it, and look in the kernel log (dmesg) "
                     "and the scheduler's record of the job")
    codes: dict[int, list[Finding]] = {}
    for f in findings:
        raw = f.values.get("exitcode")
        code = safe_int(str(raw)) if raw is not None else None
        if code is not None and code in EXIT_SIGNALS:
            codes.setdefault(code, []).append(f)
    for code, _fs in sorted(codes.items()):
        name, entry_id, meaning = EXIT_SIGNALS[code]
        if initiating is not None and initiating.id == entry_id:
            continue
        see = f"; see {entry_id}" if entry_id and entry_id in index.by_id else ""
        hints.append(f"a launcher reports exit code {code} ({name}): {meaning}{see}")
    return hints
