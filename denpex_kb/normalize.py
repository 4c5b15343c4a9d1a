"""Turning a raw log line into the text signatures are matched against, plus what its prefixes said.

Launchers, loggers and kernels wrap each line in prefixes (`[rank3]:`, `0: `, glog headers, timestamps,
ANSI colours). Each prefix kind is one named object; they are peeled off the front of the line repeatedly,
since real lines stack them (`2024-05-01 10:00:00 node7: [rank3]: ...`).
"""

from __future__ import annotations

import re
from typing import NamedTuple

MAX_LINE = 16_384  # what a signature can need; the rest of a giant line is not read
MAX_DIGITS = 9  # a rank, pid, tid or device number read from a prefix; longer digit runs are not a prefix
_N = rf"\d{{1,{MAX_DIGITS}}}"

# Escape sequences: CSI (colours), OSC ended by BEL or ST (titles, OSC 52 clipboard writes), DCS/SOS/PM/APC
# strings, then any other ESC sequence (`ESC c` reset, `ESC ( B` charset). What is left is shown escaped.
_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[PX^_][^\x1b]*\x1b\\|\x1b[ -/]*[0-~]"
)
# A tqdm bar, as left in the line before the message that was printed after it without a newline.
_TQDM = re.compile(r"^.*?\d{1,3}%\|[^|]{0,200}\| ?[\d.]+[kMG]?/[\d.?]+[kMG]? \[[^\]]{0,80}\]")


class Prefix(NamedTuple):
    """One kind of prefix; the pattern's named groups (rank, host, pid, level, device) are kept."""

    name: str
    pattern: re.Pattern[str]


PREFIXES: tuple[Prefix, ...] = (
    Prefix("torchrun-rank", re.compile(rf"^\[rank(?P<rank>{_N})\]: ?")),
    Prefix("torchrun-role", re.compile(rf"^\[(?:default|worker|trainer)(?P<rank>{_N})\]: ?")),
    Prefix("openmpi", re.compile(rf"^\[{_N},(?P<rank>{_N})\]<(?:stdout|stderr)>: ?")),
    Prefix("srun-label", re.compile(r"^ ?(?P<rank>\d{1,5}): ")),
    Prefix("ray", re.compile(rf"^\((?:[\w.]+ )?pid=(?P<pid>{_N})(?:, ip=[\d.]{{1,64}})?\) ?")),
    # `docker compose logs` / `up`: the container's name padded to the longest name plus one, then " | "
    # (cmd/formatter/logs.go), so at least two spaces before the bar.
    Prefix("compose-service", re.compile(r"^[A-Za-z0-9][\w.-]{0,127}  +\| ")),
    Prefix(
        "glog",
        re.compile(rf"^\[?(?P<level>[IWEF])\d{{3,4}} \d\d:\d\d:\d\d\.\d+(?: +(?P<pid>{_N}))? [\w./-]+:\d+\] ?"),
    ),
    Prefix("c10-short", re.compile(r"^\[(?P<level>[IWEF]) [\w./-]+:\d+\] ?")),
    Prefix(
        "nccl",
        # Newer NCCL puts the source file and line before the level: `[0] transport/p2p.cc:238 NCCL WARN`.
        re.compile(rf"^(?P<host>[\w.-]+):(?P<pid>{_N}):(?P<tid>{_N}) \[(?P<device>{_N})\] (?:[\w./-]+:\d+ )?(?=NCCL )"),
    ),
    Prefix("kernel-time", re.compile(r"^\[ *\d+\.\d+\] ?")),
    Prefix("dmesg-human", re.compile(r"^\[(?P<stamp>(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4})\] ?")),
    Prefix(
        "syslog",
        re.compile(r"^(?P<stamp>\w{3} [ \d]\d \d\d:\d\d:\d\d) (?P<host>[\w.-]+) (?:kernel|[\w.-]+(?:\[\d+\])?): ?"),
    ),
    # The same with an RFC 3339 stamp (rsyslog's high-precision format, journalctl -o short-iso). There the
    # program must be the kernel or carry its pid: `kubectl logs --timestamps` and `docker logs -t` put the same
    # stamp before any text, and `2024-05-01T12:00:00Z CUDA Exception: ...` is a message, not host CUDA's program.
    Prefix(
        "syslog-iso",
        re.compile(r"^(?P<stamp>\d{4}-\d\d-\d\dT[\d:.]+(?:Z|[+-]\d\d:?\d\d)?) (?P<host>[\w.-]+) (?:kernel|[\w.-]+\[\d+\]): ?"),
    ),
    Prefix(
        "timestamp",
        re.compile(
            r"^\[?(?P<stamp>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)\]?(?: ?[|-] ?)? ?"
        ),
    ),
    # vLLM-style `LEVEL MM-DD HH:MM:SS [file.py:N]` logger headers.
    Prefix(
        "level-date-file",
        re.compile(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d (?:\[[\w./-]+:\d+\]|[\w./-]+:\d+\]) ?"),
    ),
    Prefix("time-only", re.compile(r"^\[?\d\d:\d\d:\d\d(?:[.,]\d+)?\]? ")),
    # pdsh/clush `host: `: a lowercase host name with a digit, so `RuntimeError: ` is never taken for one. Not
    # after a kernel log's time stamp: there the same shape is the kernel's device tag (`nvidia-nvswitch1: `).
    Prefix("pdsh-host", re.compile(r"^(?P<host>[a-z][a-z0-9-]*\d[a-z0-9.-]*): ")),
)


_FIELDS = ("rank", "host", "pid", "stamp")
# Prefixes of the kernel's own log lines.
KERNEL_PREFIXES = frozenset({"kernel-time", "dmesg-human", "syslog", "syslog-iso"})
# A prefix kind that is not one right after these kinds: there its shape is part of the message (a kernel device
# tag such as `nvidia-nvswitch1: ` after a kernel time stamp), so stripping stops. Exported to the hub's page.
NOT_AFTER: dict[str, frozenset[str]] = {"pdsh-host": KERNEL_PREFIXES}


def _combined(prefixes: tuple[Prefix, ...]) -> tuple[re.Pattern[str], dict[int, tuple[str, int, int, int, int]]]:
    """Every prefix in one alternation, tried in order (as a loop over PREFIXES would, but in one call): group
    `_k` says which prefix matched, and its fields are renamed `_k_<field>` (a name may not repeat). The table
    maps the number of group `_k` (a match's lastindex) to the prefix's name and the group number of each of
    _FIELDS in it (0 where it has none)."""
    parts = []
    for k, prefix in enumerate(prefixes):
        source = prefix.pattern.pattern
        assert source.startswith("^"), prefix.name
        source = re.sub(r"\(\?P<(\w+)>", rf"(?P<_{k}_\1>", source[1:])
        parts.append(f"(?P<_{k}>{source})")
    pattern = re.compile("|".join(parts))
    table = {}
    for k, prefix in enumerate(prefixes):
        rank, host, pid, stamp = (pattern.groupindex.get(f"_{k}_{f}", 0) for f in _FIELDS)
        table[pattern.groupindex[f"_{k}"]] = (prefix.name, rank, host, pid, stamp)
    return pattern, table


_ANY_PREFIX, _PREFIX_TABLE = _combined(PREFIXES)


class Line:
    """A normalised line: prefixes and colours removed, whitespace collapsed, and what the prefixes said."""

    __slots__ = ("host", "indented", "pid", "prefixes", "rank", "stamp", "text")

    def __init__(self, text: str, rank: int | None = None, host: str | None = None, pid: int | None = None) -> None:
        self.text = text
        self.rank = rank
        self.host = host
        self.pid = pid
        self.stamp: str | None = None  # the first timestamp a prefix carried, as written
        self.prefixes: list[str] = []
        self.indented = False  # the message itself started with whitespace (a traceback frame)

    def copy(self) -> Line:
        """A shallow copy (the prefixes list is shared), for a remembered line whose rank a caller may set."""
        line = Line(self.text, self.rank, self.host, self.pid)
        line.stamp, line.prefixes, line.indented = self.stamp, self.prefixes, self.indented
        return line

    def __repr__(self) -> str:
        return f"Line(text={self.text!r}, rank={self.rank}, host={self.host!r}, pid={self.pid}, prefixes={self.prefixes})"


def safe_int(text: str | None, digits: int = MAX_DIGITS) -> int | None:
    """An integer read from a log, or None when it is not one or is longer than `digits` digits (Python refuses
    to convert 4,301+ digits, and no rank, pid or exit code is that long)."""
    if text is None:
        return None
    text = text.strip()
    body = text[1:] if text[:1] in "+-" else text
    if not body or len(body) > digits or not body.isascii() or not body.isdigit():
        return None
    return int(text)


def last_segment(raw: str) -> str:
    """The last non-empty carriage-return segment of a line (what a terminal shows of a redrawn progress bar),
    cut to MAX_LINE only after the split, so a long bar before the message hides nothing."""
    end = len(raw)
    while True:
        cr = raw.rfind("\r", 0, end)
        segment = raw[cr + 1 : min(end, cr + 1 + MAX_LINE)]
        if segment.strip() or cr < 0:
            return segment if segment.strip() else ""
        end = cr


def strip_prefixes(raw: str) -> Line:
    text = last_segment(raw) if "\r" in raw else raw[:MAX_LINE]
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "%|" in text:
        bar = _TQDM.match(text)
        if bar:
            text = text[bar.end() :]
    text = text.replace("\x00", "").rstrip("\n")
    line = Line(text="")
    for _ in range(8):
        stripped = text.lstrip(" ") if not line.prefixes else text
        m = _ANY_PREFIX.match(stripped)
        if not m or m.end() == 0:  # no prefix pattern matches empty text, so the first that matches is the one
            break
        name, rank, host, pid, stamp = _PREFIX_TABLE[m.lastindex]  # type: ignore[index]
        if line.prefixes and line.prefixes[-1] in NOT_AFTER.get(name, ()):
            break  # e.g. a kernel device tag, part of the message
        if rank and line.rank is None and m.group(rank) is not None:
            line.rank = safe_int(m.group(rank))
        if host and line.host is None and m.group(host):
            line.host = m.group(host)
        if pid and line.pid is None and m.group(pid):
            line.pid = safe_int(m.group(pid))
        if stamp and line.stamp is None and m.group(stamp):
            line.stamp = m.group(stamp)
        line.prefixes.append(name)
        text = stripped[m.end() :]
    line.indented = text[:1] in (" ", "\t")
    line.text = " ".join(text.split())  # whitespace runs collapsed (str.split and re agree on what whitespace is), in C
    return line


TRACEBACK = "Traceback (most recent call last)"  # a Python traceback's header line

# How an exception class's name ends. One list for the grammar below and the scan prefilter's markers, so a
# line the grammar would accept is never filtered out before it is read.
EXCEPTION_SUFFIXES = ("Error", "Exception", "Failure", "Interrupt", "Exit", "Abort")
EXCEPTION_NAMES = ("KeyboardInterrupt", "StopIteration")
_EXCEPTION = re.compile(
    r"^(?P<type>(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*(?:" + "|".join(EXCEPTION_SUFFIXES) + r")|"
    + "|".join(EXCEPTION_NAMES) + r"))(?::|$)"
)


def exception_type(text: str) -> str | None:
    """The exception class a normalised line reports, e.g. `torch.OutOfMemoryError`."""
    m = _EXCEPTION.match(text)
    return m.group("type") if m else None
