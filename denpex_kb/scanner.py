"""`scan`: read a whole (multi-rank) log and report the failure that started it all, and its fallout.

Speed comes from a prefilter: one multi-literal RE2 search over large raw chunks finds the few lines that
contain an anchor of some signature (or a traceback or exception marker); only those lines are normalised
and matched. Memory stays bounded by the chunk size, whatever the log's size or line lengths.
"""

from __future__ import annotations

import gzip
import io
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, BinaryIO, Union

import re2

from .bundle import KbIndex, default_index
from .masks import mask_line
from .matcher import match_line, score_for
from .normalize import MAX_LINE, exception_type, strip_prefixes

CHUNK = 8 << 20
TRACEBACK = "Traceback (most recent call last)"
TRACEBACK_REACH = 400  # lines after a traceback header in which its exception line is expected
GENERIC_MARKERS = (TRACEBACK, "Error", "Exception", "Interrupt")
UNKNOWN_SCORE = 40

# What a negative exit code in a launcher summary says: the signal that ended the rank, and the entry that
# usually explains it.
EXIT_SIGNALS: dict[int, tuple[str, str | None, str]] = {
    -6: ("SIGABRT", None, "the process aborted itself (a failed C++ check or abort()); look for the last error it printed"),
    -7: ("SIGBUS", "dataloader-worker-killed-shm", "a bus error, most often shared memory (/dev/shm) running out"),
    -9: ("SIGKILL", "host-oom-killed", "killed from outside, most often by the host OOM killer or the scheduler"),
    -11: ("SIGSEGV", "segmentation-fault", "a segmentation fault in native code"),
    -15: ("SIGTERM", "job-preempted-sigterm", "asked to stop: preemption, a time limit, or the launcher stopping siblings"),
    137: ("SIGKILL", "host-oom-killed", "exit status 137 is 128+9: killed by SIGKILL, most often the OOM killer"),
    139: ("SIGSEGV", "segmentation-fault", "exit status 139 is 128+11: a segmentation fault"),
}

Source = Union[str, "os.PathLike[str]", BinaryIO, Iterable[str], Iterable[bytes]]


class ScanError(Exception):
    """The log could not be read (missing, a directory, unreadable, corrupt compression)."""


@dataclass
class Finding:
    id: str | None  # None: an exception no entry knows
    line: int  # 1-based, in `file`
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
    order: tuple[int, int] = (0, 0)  # (file position, line) for ordering

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("order")
        return d


@dataclass
class ScanReport:
    findings: list[Finding]
    initiating: Finding | None
    lines: int
    files: list[str]
    hints: list[str] = field(default_factory=list)
    index: KbIndex | None = None
    errors: list[str] = field(default_factory=list)  # what could not be read; findings cover the rest

    @cached_property
    def entry(self) -> dict[str, Any] | None:
        """The full entry of the initiating failure, when it is a known one."""
        if self.initiating is None or self.initiating.id is None or self.index is None:
            return None
        return self.index.full_entries.get(self.initiating.id)

    @property
    def collateral(self) -> list[Finding]:
        return [f for f in self.findings if f.role == "collateral"]

    def to_dict(self) -> dict[str, Any]:
        entry = self.entry or {}
        return {
            "files": self.files,
            "lines": self.lines,
            "initiating": self.initiating.to_dict() if self.initiating else None,
            "fix": (entry.get("fix") or {}).get("summary") if entry else None,
            "verify": [c["run"] for c in entry.get("commands", []) if c.get("purpose") == "verify"] if entry else [],
            "url": f"{self.index.by_id[self.initiating.id].url}" if self.index and self.initiating and self.initiating.id else None,
            "hints": self.hints,
            "errors": self.errors,
            "findings": [f.to_dict() for f in self.findings],
        }


class _Collector:
    """Per-line logic shared by every input path: normalise, match, remember tracebacks, fold repeats."""

    def __init__(self, index: KbIndex) -> None:
        self.index = index
        self.groups: dict[tuple[str, str], Finding] = {}
        self.tracebacks: dict[tuple[int, int | None], int] = {}  # (file, rank) -> line of the last header
        self.file_no = 0
        self.file_name: str | None = None

    def line(self, raw: str, number: int) -> None:
        line = strip_prefixes(raw)
        text = line.text
        if not text:
            return
        hits = match_line(text, self.index, line)
        exc = exception_type(text) if not line.indented else None
        if hits:
            sig, m = max(hits, key=lambda h: (h[0].role == "initiating", score_for(h[0].specificity), h[0].specificity, h[0].entry.id))
            values: dict[str, Any] = {}
            for other, om in hits:  # every signature of the chosen entry that matched adds its values
                if other.entry is sig.entry:
                    values.update({k: v for k, v in om.groupdict().items() if v is not None and k not in values})
            self._add(sig.entry.id, sig.entry.title, text, line.rank, number, score_for(sig.specificity), exc, sig.role, values)
            return
        if text.startswith(TRACEBACK):
            self.tracebacks[(self.file_no, line.rank)] = number
            return
        if exc:
            start = self.tracebacks.get((self.file_no, line.rank))
            if start is not None and 0 < number - start <= TRACEBACK_REACH:
                self._add(None, None, text, line.rank, number, UNKNOWN_SCORE, exc, "initiating", {})
                del self.tracebacks[(self.file_no, line.rank)]

    def _add(self, entry_id: str | None, title: str | None, text: str, rank: int | None, number: int, score: int,
             exc: str | None, role: str, values: dict[str, Any]) -> None:
        key = (entry_id or f"?{exc}", mask_line(text))
        found = self.groups.get(key)
        if found is not None:
            found.count += 1
            if rank is not None and rank not in found.ranks:
                found.ranks.append(rank)
            return
        self.groups[key] = Finding(
            id=entry_id, line=number, rank=rank, role=role, text=text, score=score, exception=exc, title=title,
            file=self.file_name, ranks=[rank] if rank is not None else [], values=values, signature_role=role,
            order=(self.file_no, number),
        )

    def report(self, lines: int, files: list[str]) -> ScanReport:
        findings = sorted(self.groups.values(), key=lambda f: f.order)
        for f in findings:
            f.ranks.sort()
        initiating = _choose_initiating(findings, self.index)
        for f in findings:
            f.role = "initiating" if f is initiating else "collateral"
        return ScanReport(findings, initiating, lines, files, _hints(findings, initiating, self.index), self.index)


def _choose_initiating(findings: list[Finding], index: KbIndex) -> Finding | None:
    # The earliest root cause the knowledge base knows; else the earliest exception from a traceback; else
    # the most telling piece of fallout (launcher summaries last, since they only say that a child died).
    known = [f for f in findings if f.id and f.signature_role == "initiating"]
    if known:
        return known[0]
    unknown = [f for f in findings if f.id is None]
    if unknown:
        return unknown[0]
    if not findings:
        return None

    def launcher(f: Finding) -> bool:
        info = index.by_id.get(f.id or "")
        return bool(info and "launcher" in info.tags)

    return sorted(findings, key=lambda f: (launcher(f), f.order))[0]


def _hints(findings: list[Finding], initiating: Finding | None, index: KbIndex) -> list[str]:
    hints: list[str] = []
    codes: dict[int, list[Finding]] = {}
    for f in findings:
        raw = f.values.get("exitcode")
        try:
            code = int(raw) if raw is not None else None
        except ValueError:
            code = None
        if code is not None and code in EXIT_SIGNALS:
            codes.setdefault(code, []).append(f)
    for code, fs in sorted(codes.items()):
        name, entry_id, meaning = EXIT_SIGNALS[code]
        if initiating is not None and initiating.id == entry_id:
            continue
        see = f"; see {entry_id}" if entry_id and entry_id in index.by_id else ""
        hints.append(f"a launcher reports exit code {code} ({name}): {meaning}{see}")
    return hints


def _prefilter(index: KbIndex) -> Any:
    literals = sorted(set(index.all_anchors) | set(GENERIC_MARKERS))
    options = re2.Options()
    options.max_mem = 256 << 20  # a big DFA cache keeps the multi-literal search at full speed
    return re2.compile(b"|".join(re2.escape(a.encode("utf-8")) for a in literals), options)


_PREFILTERS: dict[int, Any] = {}


def prefilter_for(index: KbIndex) -> Any:
    key = id(index)
    if key not in _PREFILTERS:
        _PREFILTERS[key] = _prefilter(index)
    return _PREFILTERS[key]


def _open(path: Path) -> BinaryIO:
    try:
        st = path.stat()
    except FileNotFoundError:
        raise ScanError(f"{path}: no such file") from None
    except OSError as exc:
        raise ScanError(f"{path}: {exc.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise ScanError(f"{path}: is a directory; give the log files inside it")
    try:
        fh: BinaryIO = open(path, "rb")  # noqa: SIM115
    except PermissionError:
        raise ScanError(f"{path}: permission denied") from None
    except OSError as exc:
        raise ScanError(f"{path}: {exc.strerror}") from None
    head = fh.read(2) if stat.S_ISREG(st.st_mode) else b""
    if head == b"\x1f\x8b":
        fh.seek(0)
        return gzip.GzipFile(fileobj=fh)  # type: ignore[return-value]
    if stat.S_ISREG(st.st_mode):
        fh.seek(0)
    else:
        return _Prepend(head, fh)  # type: ignore[return-value]
    return fh


class _Prepend(io.RawIOBase):
    """A pipe whose first bytes were already read to sniff for gzip."""

    def __init__(self, head: bytes, rest: BinaryIO) -> None:
        self.head = head
        self.rest = rest

    def read(self, n: int = -1) -> bytes:  # type: ignore[override]
        if self.head:
            out, self.head = self.head, b""
            return out + self.rest.read(max(n - len(out), 0)) if n and n > len(out) else out
        return self.rest.read(n)

    def close(self) -> None:
        self.rest.close()


def _read_block(fh: BinaryIO) -> tuple[bytes, ScanError | None]:
    """Up to CHUNK bytes. Reads in small steps so that a truncated or corrupt stream keeps what came before."""
    read = getattr(fh, "read1", fh.read)
    parts: list[bytes] = []
    size = 0
    while size < CHUNK:
        try:
            part = read(min(1 << 20, CHUNK - size))
        except (EOFError, gzip.BadGzipFile, OSError, ValueError) as exc:
            return b"".join(parts), ScanError(f"the log is truncated or corrupt ({exc}); findings cover what was read")
        if not part:
            break
        parts.append(part)
        size += len(part)
    return b"".join(parts), None


def _chunks(fh: BinaryIO, on_bytes: Callable[[int], None] | None, errors: list[ScanError]) -> Iterator[bytes]:
    """Chunks that end at a line break (the last one may not), with over-long lines cut to MAX_LINE bytes."""
    carry = b""
    while True:
        block, error = _read_block(fh)
        if on_bytes and block:
            on_bytes(len(block))
        if error is not None:
            errors.append(error)
        if not block or error is not None:
            data = carry + block
            if data:
                yield data
            return
        data = carry + block
        cut = data.rfind(b"\n")
        if cut < 0:
            # One line longer than a chunk: keep its start (what a signature can need), drop the rest.
            carry = data[:MAX_LINE]
            continue
        yield data[: cut + 1]
        carry = data[cut + 1 :]
        if len(carry) > MAX_LINE * 4:
            carry = carry[:MAX_LINE]


def _scan_chunk(pattern: Any, chunk: bytes) -> list[tuple[int, int]]:
    """(line start, line end) of every line in `chunk` containing a prefilter literal."""
    spans: list[tuple[int, int]] = []
    last_start = -1
    for m in pattern.finditer(chunk):
        pos = m.start()
        start = chunk.rfind(b"\n", 0, pos) + 1
        if start == last_start:
            continue
        end = chunk.find(b"\n", pos)
        spans.append((start, len(chunk) if end < 0 else end))
        last_start = start
    return spans


def _scan_stream(
    fh: BinaryIO, collector: _Collector, pattern: Any, on_bytes: Callable[[int], None] | None
) -> tuple[int, ScanError | None]:
    lines = 0
    errors: list[ScanError] = []
    with ThreadPoolExecutor(max_workers=2) as pool:
        # RE2 releases the GIL, so the next chunk is searched while this one's hits are matched.
        pending: list[Any] = []
        chunks = _chunks(fh, on_bytes, errors)

        def submit() -> bool:
            try:
                chunk = next(chunks)
            except StopIteration:
                return False
            pending.append((chunk, pool.submit(_scan_chunk, pattern, chunk)))
            return True

        for _ in range(2):
            submit()
        while pending:
            chunk, future = pending.pop(0)
            spans = future.result()
            submit()
            counted = 0
            number = lines
            for start, end in spans:
                number += chunk.count(b"\n", counted, start)
                counted = start
                raw = chunk[start : min(end, start + MAX_LINE)].decode("utf-8", "replace")
                collector.line(raw, number + 1)
            lines += chunk.count(b"\n")
            if chunk and not chunk.endswith(b"\n"):
                lines += 1
    return lines, (errors[0] if errors else None)


def scan(source: Source, *, index: KbIndex | None = None, progress: Callable[[int], None] | None = None) -> ScanReport:
    """Scan a log: a path (plain or gzip), a binary file object, or an iterable of lines (str or bytes)."""
    return scan_many([source], index=index, progress=progress)


def scan_many(sources: list[Source], *, index: KbIndex | None = None, progress: Callable[[int], None] | None = None) -> ScanReport:
    """Scan several logs (e.g. one per rank) as one job. Paths are read in sorted order, so the report does not
    depend on the order they were given in."""
    index = index or default_index()
    collector = _Collector(index)
    pattern = prefilter_for(index)
    total = 0
    names: list[str] = []
    paths = sorted((s for s in sources if isinstance(s, (str, os.PathLike))), key=lambda p: str(p))
    others = [s for s in sources if not isinstance(s, (str, os.PathLike))]
    errors: list[ScanError] = []
    if isinstance(sources, (str, bytes)):
        raise TypeError("scan_many takes a list of sources")
    for file_no, src in enumerate([*paths, *others]):
        collector.file_no = file_no
        if isinstance(src, (str, os.PathLike)) or hasattr(src, "read"):
            if hasattr(src, "read"):
                name, fh, owned = "<stdin>", src, False
            else:
                name, fh, owned = str(src), _open(Path(src)), True
            collector.file_name = name
            names.append(name)
            try:
                count, err = _scan_stream(fh, collector, pattern, progress)  # type: ignore[arg-type]
            finally:
                if owned:
                    fh.close()  # type: ignore[union-attr]
            total += count
            if err is not None:
                errors.append(err)
        else:
            collector.file_name = None
            names.append("<lines>")
            number = 0
            for number, item in enumerate(src, 1):
                raw = item.decode("utf-8", "replace") if isinstance(item, bytes) else item
                raw = raw[:MAX_LINE]
                if pattern.search(raw.encode("utf-8", "replace")):
                    collector.line(raw.rstrip("\r\n"), number)
            total += number
    report = collector.report(total, names)
    report.errors = [str(e) for e in errors]
    return report
