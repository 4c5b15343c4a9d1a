"""From a scan report to what a launcher should do: retry as is, retry without a node, fix first, or unknown.

The initiating failure's `response` decides, with one override: a hardware fault on any rank (an entry whose
response is `elsewhere`: Xid, ECC, a GPU fallen off the bus, a link down) makes the verdict `elsewhere`,
whatever the software on the other ranks said, since those errors are usually its fallout. A hardware line
stamped before the job's first line is from an earlier job on the node and is reported, not acted on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from .exitcodes import LAUNCHER_EXITS
from .normalize import safe_int

if TYPE_CHECKING:
    from .scanner import Finding, ScanReport

# Exit codes of `scan --exit-by-verdict`, for launchers and schedulers.
EXIT_CODES: dict[str, int] = {"none": 0, "yes": 10, "elsewhere": 11, "no": 12, "depends": 12, "unknown": 13}
EXIT_HELP = (
    "0 no failure found; 10 retry as is; 11 retry elsewhere (exclude what is printed); "
    "12 do not retry: fix first (also when the answer depends on a check a person makes); "
    "13 a failure no entry knows"
)

_PCI = re.compile(r"\bPCI:(?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)")
_PCI_BARE = re.compile(r"\b(?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\b")
_XID = re.compile(r"\bXid\b(?: \([^)]*\))?:\s*(?P<xid>\d{1,3})\b")
_MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}


@dataclass(frozen=True)
class Verdict:
    retry: str  # yes | elsewhere | no | depends | unknown
    blame: str | None
    reason: str
    entry: str | None
    exclude: tuple[str, ...] = ()  # host names to keep the rerun off
    devices: tuple[str, ...] = ()  # PCI bus ids of the faulty GPUs or adapters, where the log names them
    stale: tuple[str, ...] = field(default=())  # hardware lines from before this job, not acted on

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.retry]

    def headline(self) -> str:
        """One line for the top of the text report."""
        if self.retry == "elsewhere":
            if self.exclude:
                where = f"exclude node{'s' if len(self.exclude) > 1 else ''} {', '.join(self.exclude)}"
            elif self.devices:
                where = f"exclude the node holding {', '.join(self.devices)}"
            else:
                where = "exclude the node this log came from (the log names no host)"
            return f"Retry elsewhere: {where} ({self.reason})"
        label = {
            "yes": "Retry as is",
            "no": "Do not retry: fix first",
            "depends": "Do not retry blindly: it depends",
            "unknown": "Unknown failure: no entry knows it",
        }[self.retry]
        return f"{label} ({self.reason})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "retry": self.retry,
            "blame": self.blame,
            "exclude": list(self.exclude),
            "devices": list(self.devices),
            "reason": self.reason,
            "entry": self.entry,
            "stale": list(self.stale),
            "exit_code": self.exit_code,
        }


def parse_stamp(text: str | None, year: int | None = None) -> datetime | None:
    """A prefix's timestamp as a naive UTC-less datetime; syslog stamps (no year) take `year`."""
    if not text:
        return None
    text = text.strip()
    try:
        if text[:4].isdigit():  # ISO 8601, with "T" or a space, optional fraction and zone
            iso = text.replace(",", ".")
            stamp = datetime.fromisoformat(iso.replace("Z", "+00:00"))
            return stamp.astimezone(timezone.utc).replace(tzinfo=None) if stamp.tzinfo else stamp
        parts = text.split()
        if len(parts) == 5:  # dmesg -T: "Tue Dec  1 10:00:03 2026"
            return datetime.strptime(" ".join(parts[1:]), "%b %d %H:%M:%S %Y")
        if len(parts) == 3 and parts[0] in _MONTHS and year is not None:  # syslog: "Dec  1 10:00:03"
            return datetime.strptime(f"{year} {parts[0]} {parts[1]} {parts[2]}", "%Y %b %d %H:%M:%S")
    except ValueError:
        return None
    return None


def _devices(finding: Finding) -> list[str]:
    found = [m.group("pci") for m in _PCI.finditer(finding.text)]
    found += [m.group("pci") for m in _PCI_BARE.finditer(finding.text) if m.group("pci") not in found]
    return found


def _faulty_hosts(finding: Finding) -> list[str]:
    """The nodes a hardware finding blames. A signature's `host` group names the node at fault ("Node failure on
    gpu-9", printed by srun on another node), so it wins over the host of the line's prefix, which is only where
    the line was logged; without one, the prefix's host is the node (a kernel log's own host name)."""
    named = finding.values.get("host")
    return [named] if isinstance(named, str) and named else list(finding.hosts)


def _where(finding: Finding) -> str:
    xid = _XID.search(finding.text)
    what = f"Xid {xid.group('xid')}" if xid else (finding.title or finding.id or "a hardware fault")
    if finding.ranks:
        ranks = finding.ranks
        return f"{what} on rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks[:8]))}"
    hosts = _faulty_hosts(finding)
    if hosts:
        return f"{what} on {', '.join(hosts[:8])}"
    return what




def _exit_code(finding: Finding) -> int | None:
    raw = finding.values.get("exitcode")
    return safe_int(str(raw), digits=3) if raw is not None else None


def _from_exit_code(report: ScanReport, initiating: Finding) -> Verdict | None:
    """When the only evidence is a launcher's exit code, read it with what else the log holds."""
    index = report.index
    assert index is not None
    launcher = [f for f in report.findings if "launcher" in getattr(index.by_id.get(f.id or ""), "tags", ())]
    codes = [c for c in (_exit_code(f) for f in [initiating, *launcher]) if c is not None and c in LAUNCHER_EXITS]
    if not codes:
        return None
    # Rows with -15 are usually the siblings the launcher stopped after the first failure: any other code wins.
    code = next((c for c in codes if c != -15), codes[0])
    row = LAUNCHER_EXITS[code]
    meaning, usual, explained_by = row.short, row.likely if row.names_likely else None, row.explained_by
    present = {f.id for f in report.findings if f.id}
    for entry_id in explained_by:
        info = index.by_id.get(entry_id)
        if entry_id in present and info is not None and info.retry:
            note = f": {info.response_note}" if info.retry == "depends" and info.response_note else ""
            return Verdict(info.retry, info.blame, f"exit code {code} ({meaning}) after {entry_id}{note}", entry_id)
    usual_info = index.by_id.get(usual or "")
    if usual_info is not None:
        return Verdict("depends", usual_info.blame,
                       f"exit code {code} is the only evidence ({meaning}); most often {usual_info.id}", usual_info.id)
    return Verdict("depends", None, f"exit code {code} is the only evidence ({meaning}); look at that rank's last lines and the kernel log",
                   initiating.id)


def decide(report: ScanReport) -> Verdict | None:
    initiating = report.initiating
    index = report.index
    if initiating is None or index is None:
        return None

    def response(f: Finding) -> tuple[str | None, str | None]:
        info = index.by_id.get(f.id or "")
        return (info.retry, info.blame) if info else (None, None)

    hardware = [f for f in report.findings if response(f)[0] == "elsewhere" and not f.before_job]
    stale = [
        f"{_where(f)} at {f.stamp}, before this job's first line ({report.start})"
        for f in report.findings if f.before_job and response(f)[0] == "elsewhere"
    ]
    if hardware:
        first = hardware[0]
        hosts: list[str] = []
        devices: list[str] = []
        for f in hardware:
            hosts += [h for h in _faulty_hosts(f) if h not in hosts]
            devices += [d for d in _devices(f) if d not in devices]
        return Verdict("elsewhere", response(first)[1], _where(first), first.id, tuple(hosts), tuple(devices), tuple(stale))
    if initiating.before_job:  # nothing of this job's own was found
        return Verdict("unknown", None, "the only failure lines predate this job", None, stale=tuple(stale))
    if initiating.id is None:
        what = initiating.exception or "an exception"
        return Verdict("unknown", None, f"{what} on rank {initiating.rank}" if initiating.rank is not None else what,
                       None, stale=tuple(stale))
    info = index.by_id.get(initiating.id)
    if info is not None and "launcher" in info.tags and initiating.signature_role == "collateral":
        contextual = _from_exit_code(report, initiating)
        if contextual is not None:
            return Verdict(contextual.retry, contextual.blame, contextual.reason, contextual.entry, stale=tuple(stale))
    retry, blame = response(initiating)
    at = f" on rank {initiating.rank}" if initiating.rank is not None else ""
    if retry is None:  # a draft entry with no response yet
        return Verdict("unknown", None, f"{initiating.id}{at}: this entry does not say yet", initiating.id, stale=tuple(stale))
    reason = f"{initiating.id}{at}"
    if retry == "depends" and info and info.response_note:
        reason += f": {info.response_note}"
    return Verdict(retry, blame, reason, initiating.id, stale=tuple(stale))
