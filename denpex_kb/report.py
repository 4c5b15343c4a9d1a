"""What a scan reports: its findings, the initiating one, the verdict, and the versions it saw."""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any

from .bundle import EntryInfo, KbIndex
from .verdict import Verdict, decide
from .versions import assess


class ScanError(Exception):
    """The log could not be read (missing, a directory, unreadable, corrupt compression)."""


@dataclass
class Finding:
    id: str | None  # None: an exception no entry knows
    line_number: int  # 1-based, in `file`
    rank: int | None
    role: str  # "initiating" or "collateral"
    text: str  # the normalised line
    score: int
    exception: str | None = None
    title: str | None = None
    file: str | None = None
    ranks: list[int] = field(default_factory=list)
    count: int = 1  # how many lines folded into this finding (one per rank, usually)
    values: dict[str, Any] = field(default_factory=dict)
    signature_role: str = "initiating"  # what the entry says of the line, before causality is decided
    hosts: list[str] = field(default_factory=list)  # host names the lines' prefixes gave (syslog, NCCL, pdsh)
    stamp: str | None = None  # the first line's timestamp, as written
    kernel: bool = False  # read from a kernel log (syslog, dmesg)
    before_job: bool = False  # a kernel-log line stamped before the job's first line: an earlier job's event
    # How the entry was named: "exact" (a signature), "fingerprint" (a sequence of events), "fuzzy" (an unknown
    # exception line close to a wording an entry knows), "evidence" (an exception class alone); None: unnamed.
    tier: str | None = None
    # A final exception line that no traceback header announced (a rank's last words, a custom exception class)
    without_traceback: bool = False
    order: tuple[int, int] = (0, 0)  # (file position, line) for ordering

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("order")
        return d

    @property
    def fallout_only(self) -> bool:
        """Chosen as the initiating failure although its entry calls the line fallout (a watchdog timeout, a
        launcher's summary): the log holds no root cause, and this is its earliest symptom."""
        return self.role == "initiating" and self.signature_role == "collateral"

    @property
    def line(self) -> int:
        """Deprecated in 0.2.0, removed in 0.3.0: the line's number is `line_number` (`line` names a `Line`)."""
        warnings.warn("Finding.line is deprecated; use Finding.line_number", DeprecationWarning, stacklevel=2)
        return self.line_number


@dataclass
class ScanReport:
    findings: list[Finding]
    initiating: Finding | None
    lines: int
    files: list[str]
    hints: list[str] = field(default_factory=list)
    index: KbIndex | None = None
    errors: list[str] = field(default_factory=list)  # what could not be read; findings cover the rest
    start: str | None = None  # the job's first timestamp, as written (kernel-log lines excluded)
    versions: dict[str, str] = field(default_factory=dict)  # package -> version the log (or --env) names

    @cached_property
    def version_notes(self) -> tuple[str, ...]:
        """What the versions seen say of the initiating entry's affected versions (never used to drop it)."""
        info = self.info
        if info is None or not info.versions or not self.versions:
            return ()
        return assess(dict(info.versions), self.versions).notes

    @cached_property
    def verdict(self) -> Verdict | None:
        """Retry as is, retry elsewhere (and what to exclude), fix first, or unknown; None for a healthy log."""
        return decide(self)

    @cached_property
    def entry(self) -> dict[str, Any] | None:
        """The full entry of the initiating failure, when it is a known one."""
        if self.initiating is None or self.initiating.id is None or self.index is None:
            return None
        return self.index.full_entries.get(self.initiating.id)

    @property
    def info(self) -> EntryInfo | None:
        """The index's summary of the initiating entry (fix, verify commands, url): no prose to load."""
        if self.initiating is None or self.initiating.id is None or self.index is None:
            return None
        return self.index.by_id.get(self.initiating.id)

    @property
    def collateral(self) -> list[Finding]:
        return [f for f in self.findings if f.role == "collateral"]

    def to_dict(self) -> dict[str, Any]:
        info = self.info
        return {
            "files": self.files,
            "lines": self.lines,
            "verdict": self.verdict.to_dict() if self.verdict else None,
            "initiating": self.initiating.to_dict() if self.initiating else None,
            "fix": info.fix if info else None,
            "verify": list(info.verify) if info else [],
            "url": info.url if info else None,
            "pack": info.pack if info else None,
            "hints": self.hints,
            "versions": dict(sorted(self.versions.items())),
            "version_notes": list(self.version_notes),
            "errors": self.errors,
            "findings": [f.to_dict() for f in self.findings],
        }
