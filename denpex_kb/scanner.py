"""`scan`: read a whole (multi-rank) log and report the failure that started it all, and its fallout.

Speed comes from a prefilter: one multi-literal RE2 search over large raw chunks finds the few lines that
contain an anchor of some signature (or a traceback or exception marker); only those lines are normalised
and matched. Memory stays bounded by the chunk size, whatever the log's size or line lengths.
"""

from __future__ import annotations

import gzip
import io
import mmap
import os
import re
import stat
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import pairwise
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple, Union, cast

from .bundle import KbIndex, default_index
from .causality import EXIT_SIGNALS, choose_initiating, hints_for, untimed_across_files
from .lookback import LookbackPlan
from .masks import mask_line
from .matcher import match_line, score_for
from .normalize import EXCEPTION_NAMES, EXCEPTION_SUFFIXES, MAX_LINE, Line, exception_type, strip_prefixes
from .prefilter import Prefilter, make_prefilter
from .prefilter import line_spans as _line_spans
from .report import Finding, ScanError, ScanReport
from .verdict import parse_stamp
from .versions import MARKERS as VERSION_MARKERS
from .versions import read_line as read_version

__all__ = [
    "EXIT_SIGNALS", "Finding", "ScanError", "ScanReport", "Source", "count_newlines", "prefilter_for",
    "rank_from_path", "scan", "scan_many",
]

CHUNK = 8 << 20
TRACEBACK = "Traceback (most recent call last)"
TRACEBACK_REACH = 400  # lines after a traceback header in which its exception line is expected
GENERIC_MARKERS = (TRACEBACK, *EXCEPTION_SUFFIXES, *EXCEPTION_NAMES)
UNKNOWN_SCORE = 40
MAX_VERSIONS = 64  # packages whose version a scan remembers
MAX_NAMED = 1_000  # unknown exceptions handed to the fuzzy tier per scan: its cost stays bounded
FINGERPRINT_SCORE = 80  # an ordered sequence of events, when no single line named the entry
FINGERPRINT_BONUS = 10
MAX_HOSTS = 64  # host names kept per finding
# What a scan keeps is bounded whatever the input (an endless pipe, a log of distinct garbage): distinct
# findings, ranks per finding, and the open tracebacks and fingerprint sequences being followed.
MAX_FINDINGS = 10_000
MAX_RANKS = 1 << 17
MAX_OPEN = 1 << 16
KERNEL_PREFIXES = frozenset({"syslog", "dmesg-human", "kernel-time"})
SNIFF_BYTES = 64 << 10  # how much of each file's head is read for the job's first timestamp
SNIFF_LINES = 400

Source = Union[str, "os.PathLike[str]", BinaryIO, Iterable[str], Iterable[bytes]]


# torchrun --log-dir with --redirects/--tee writes <log-dir>/<run id>/attempt_<n>/<local rank>/{stdout,stderr}.log
# (and error.json for @record); the local rank is also what its console prefix ([default3]:) gives.
_RANK_PATH = re.compile(r"(?:^|[/\\])attempt_\d+[/\\](\d{1,7})[/\\](?:stdout|stderr)\.log(?:\.(?:gz|bz2|xz))?$")


def rank_from_path(path: str) -> int | None:
    """The rank a per-rank log's path names, for lines that carry no rank prefix."""
    m = _RANK_PATH.search(path)
    return int(m.group(1)) if m else None


def _classify(index: KbIndex, text: str) -> tuple[Any, dict[str, Any]] | None:
    """The signature a normalised line is reported under, with the values of every signature of its entry that
    matched; None when no signature matches. Deterministic: the candidates are sorted first."""
    hits = sorted(match_line(text, index), key=lambda h: (h[0].entry.id, h[0].number, h[0].pattern))
    if not hits:
        return None
    sig, _m = max(hits, key=lambda h: (h[0].role == "initiating", score_for(h[0].specificity), h[0].specificity, h[0].entry.id))
    values: dict[str, Any] = {}
    for other, om in hits:  # every signature of the chosen entry that matched adds its values
        if other.entry is sig.entry:
            values.update({k: v for k, v in om.groupdict().items() if v is not None and k not in values})
    return sig, values


MEMO_LINES = 4_096  # distinct normalised lines whose facts a scan remembers at a time


class _Facts(NamedTuple):
    found: tuple[Any, dict[str, Any]] | None  # the signature the text is reported under, and its values
    exception: str | None
    fingerprints: tuple[int, ...]  # fingerprints with an anchor in the text
    versioned: bool  # holds a version marker


class _Collector:
    """Per-line logic shared by every input path: normalise, match, remember tracebacks, fold repeats."""

    def __init__(self, index: KbIndex, *, given_versions: Mapping[str, str] | None = None) -> None:
        self.index = index
        self.groups: dict[tuple[str, str], Finding] = {}
        self.tracebacks: dict[tuple[int, int | None], int] = {}  # (file, rank) -> line of the last header
        # (file, fingerprint, rank) -> (next event, line of the first event)
        self.progress: dict[tuple[int, int, int | None], tuple[int, int]] = {}
        self.file_no = 0
        self.file_name: str | None = None
        self.start: str | None = None  # the job's first timestamp (see sniff_start)
        self.dropped = 0  # distinct findings not kept (beyond MAX_FINDINGS)
        # (file, rank) -> the last exception line seen outside any traceback: reported only if the log shows a
        # failure that nothing else explains (see report)
        self.bare: dict[tuple[int, int | None], tuple[str, Line, int, str, str | None]] = {}
        self.versions: dict[str, str] = {}  # package -> the version the log first prints for it
        self.path_rank: int | None = None  # the rank the current file's path names (torchrun --log-dir)
        self.error_file = False  # reading a TorchElastic error file: its findings are the rank's own account
        self.given_versions = dict(given_versions or {})  # from the caller (--env FILE): they win
        # (anchor, fingerprint) pairs: a line that holds none of a fingerprint's anchors cannot move it on
        self._fp_anchors = [(a, k) for k, fp in enumerate(index.fingerprints) for ev in fp.events for a in ev.anchors]
        self._memo: dict[str, _Facts] = {}
        self._masked: dict[str, str] = {}  # text -> mask_line(text), for the same reason

    def _facts(self, text: str) -> _Facts:
        """What a normalised line's text alone decides, remembered: logs repeat lines (every rank, every step)."""
        facts = self._memo.get(text)
        if facts is None:
            touched = tuple(sorted({k for a, k in self._fp_anchors if a in text}))
            facts = _Facts(_classify(self.index, text), exception_type(text), touched,
                           any(marker in text for marker in VERSION_MARKERS))
            if len(self._memo) >= MEMO_LINES:
                self._memo.clear()
            self._memo[text] = facts
        return facts

    def begin_file(self, file_no: int, name: str | None, path_rank: int | None, *, error_file: bool = False) -> None:
        """The lines that follow come from this file (its place among the job's files, its name, the rank its
        path names); `error_file`: it is a TorchElastic error file, the rank's own account of its failure."""
        self.file_no, self.file_name, self.path_rank, self.error_file = file_no, name, path_rank, error_file

    def line(self, raw: str, number: int) -> None:
        line = strip_prefixes(raw)
        text = line.text
        if not text:
            return
        if line.rank is None and self.path_rank is not None:
            line.rank = self.path_rank
        facts = self._facts(text)
        if facts.versioned:
            found = read_version(text)
            if found is not None and len(self.versions) < MAX_VERSIONS:
                self.versions.setdefault(*found)
        exc = facts.exception if not line.indented else None
        self._match(text, line, number, exc, facts.found)
        if facts.fingerprints:  # after the line's own finding, which a completed sequence strengthens
            self._fingerprints(text, line.rank, number, exc, facts.fingerprints)

    def _match(self, text: str, line: Any, number: int, exc: str | None, found: tuple[Any, dict[str, Any]] | None) -> None:
        if found is not None:
            sig, values = found
            self._add(sig.entry.id, sig.entry.title, text, line.rank, number, score_for(sig.specificity), exc, sig.role,
                      dict(values), line, "exact")
            return
        if text.startswith(TRACEBACK):
            _bounded_put(self.tracebacks, (self.file_no, line.rank), number)
            return
        if exc:
            start = self.tracebacks.get((self.file_no, line.rank))
            if start is not None and 0 < number - start <= TRACEBACK_REACH:
                self._add(None, None, text, line.rank, number, UNKNOWN_SCORE, exc, "initiating", {}, line)
                del self.tracebacks[(self.file_no, line.rank)]
            else:
                _bounded_put(self.bare, (self.file_no, line.rank), (text, line, number, exc, self.file_name))

    def _fingerprints(self, text: str, rank: int | None, number: int, exc: str | None, touched: tuple[int, ...]) -> None:
        for k in touched:
            fp = self.index.fingerprints[k]
            key = (self.file_no, k, rank)
            step, first = self.progress.get(key, (0, number))
            if step and number - first > fp.within:
                step, first = 0, number  # too far apart: start over
            if not fp.events[step].matches(text):
                if step == 0 or not fp.events[0].matches(text):
                    continue
                step, first = 0, number
            step, first = step + 1, (number if step == 0 else first)
            if step < len(fp.events):
                _bounded_put(self.progress, key, (step, first))
                continue
            self.progress.pop(key, None)
            self._fingerprint_found(fp.entry.id, fp.entry.title, text, rank, number, exc)

    def _fingerprint_found(self, entry_id: str, title: str, text: str, rank: int | None, number: int, exc: str | None) -> None:
        # The whole sequence was seen: stronger evidence than any one line. Boost the entry's finding, or
        # report it when no single line named it.
        for f in self.groups.values():
            if f.id == entry_id and f.file == self.file_name:
                f.score = min(99, f.score + FINGERPRINT_BONUS)
                f.values["fingerprint"] = True
                return
        self._add(entry_id, title, text, rank, number, FINGERPRINT_SCORE, exc, "initiating", {"fingerprint": True},
                  tier="fingerprint")

    def _add(self, entry_id: str | None, title: str | None, text: str, rank: int | None, number: int, score: int,
             exc: str | None, role: str, values: dict[str, Any], line: Line | None = None,
             tier: str | None = None) -> None:
        masked = self._masked.get(text)
        if masked is None:
            if len(self._masked) >= MEMO_LINES:
                self._masked.clear()
            masked = self._masked[text] = mask_line(text)
        key = (entry_id or f"?{exc}", masked)
        host = line.host if line is not None else None
        found = self.groups.get(key)
        if found is not None:
            if self.error_file:
                found.values["error_file"] = True
            found.count += 1
            if rank is not None and len(found.ranks) < MAX_RANKS and rank not in found.ranks:
                found.ranks.append(rank)
            if host and host not in found.hosts and len(found.hosts) < MAX_HOSTS:
                found.hosts.append(host)
            return
        if len(self.groups) >= MAX_FINDINGS:
            self.dropped += 1
            return
        if self.error_file:
            values = {**values, "error_file": True}
        self.groups[key] = Finding(
            id=entry_id, line=number, rank=rank, role=role, text=text, score=score, exception=exc, title=title,
            file=self.file_name, ranks=[rank] if rank is not None else [], values=values, signature_role=role,
            hosts=[host] if host else [], stamp=line.stamp if line is not None else None,
            kernel=line is not None and bool(KERNEL_PREFIXES.intersection(line.prefixes)), order=(self.file_no, number),
            tier=tier,
        )

    def add_folded(self, folded: dict[tuple[str, str], list[Any]]) -> None:
        """A worker's folded repeats (see _fold), after the lines it kept: each group's first line is among those."""
        for group, (count, ranks, hosts) in folded.items():
            found = self.groups.get(group)
            seen = set(found.ranks) if found is not None else set()
            if found is None:  # its first line was not kept (beyond MAX_FINDINGS)
                self.dropped += count
                continue
            found.count += count
            for rank in ranks:
                if len(found.ranks) < MAX_RANKS and rank not in seen:
                    found.ranks.append(rank)
                    seen.add(rank)
            for host in hosts:
                if host not in found.hosts and len(found.hosts) < MAX_HOSTS:
                    found.hosts.append(host)

    def sniff_start(self, raw: str) -> None:
        """Remember the job's first timestamp: the first job line (not a kernel-log line) that carries one."""
        if self.start is None:
            line = strip_prefixes(raw)
            if line.stamp and not KERNEL_PREFIXES.intersection(line.prefixes):
                self.start = line.stamp

    def _bare_exceptions(self) -> None:
        """A failed job whose root cause nothing names may still show it: a rank's last exception line printed
        without a traceback header (a logger's `AssertionError: ...`, a custom `...Failure`). Added only when
        the log shows a failure (some finding) and neither a known root cause nor a traceback's exception does."""
        if not self.groups or any(f.signature_role == "initiating" for f in self.groups.values()):
            return
        for (file_no, _rank), (text, line, number, exc, name) in sorted(self.bare.items(), key=lambda kv: kv[0][0]):
            self.file_no, self.file_name = file_no, name
            self._add(None, None, text, line.rank, number, UNKNOWN_SCORE - 10, exc, "initiating", {}, line)
            key = (f"?{exc}", mask_line(text))
            if key in self.groups:
                self.groups[key].without_traceback = True

    def _name_unknown(self) -> None:
        """Unknown exceptions go to the fuzzy and evidence tiers of the matcher: a line close to a wording an
        entry knows, or an exception class alone that one or two entries raise, names the entry (labelled)."""
        fz = self.index.fuzzy if any(f.id is None for f in self.groups.values()) else None
        if fz is None:
            return
        asked = 0
        for f in self.groups.values():
            if f.id is not None or asked >= MAX_NAMED:
                continue
            asked += 1
            found = fz.line(f.text)
            if found is not None:
                known, tier = fz.known[found[0]], "fuzzy"
                entry, role = self.index.entries[known.entry], known.role
            else:
                named = fz.evidence_for(f.text)
                if not named:
                    continue
                entry, role, tier = self.index.entries[named[0]], "initiating", "evidence"
            f.id, f.title, f.tier, f.signature_role, f.role = entry.id, entry.title, tier, role, role

    def report(self, lines: int, files: list[str]) -> ScanReport:
        self._bare_exceptions()
        self._name_unknown()
        findings = sorted(self.groups.values(), key=lambda f: f.order)
        start = parse_stamp(self.start)
        for f in findings:
            f.ranks.sort()
            if start is not None and f.kernel:
                when = parse_stamp(f.stamp, start.year)
                f.before_job = when is not None and when < start
        initiating = choose_initiating(findings, self.index)
        for f in findings:
            f.role = "initiating" if f is initiating else "collateral"
        hints = hints_for(findings, initiating, self.index)
        if initiating is not None and untimed_across_files(findings):
            hints.append("root-cause candidates in several files carry no timestamps: the earliest is taken in "
                         "reading order (files as given, per-rank files sorted, so lower ranks first)")
        report = ScanReport(findings, initiating, lines, files, hints, self.index,
                            start=self.start, versions={**self.versions, **self.given_versions})
        if self.dropped:
            report.errors.append(f"{self.dropped} findings after the first {MAX_FINDINGS} distinct ones were not kept; "
                                 "the report covers those first ones")
        return report


def _bounded_put(table: dict[Any, Any], key: Any, value: Any) -> None:
    """table[key] = value, forgetting the oldest key when the table is full."""
    if key not in table and len(table) >= MAX_OPEN:
        del table[next(iter(table))]
    table[key] = value


def _keep_ends(data: bytes) -> bytes:
    """An over-long unfinished line, shortened: its first MAX_LINE bytes and, when a carriage return came after
    them, the first MAX_LINE bytes of its last segment (what a redrawn line ends with)."""
    cr = data.rfind(b"\r", MAX_LINE)
    if cr < 0:
        return data[:MAX_LINE]
    return data[:MAX_LINE] + b"\r" + data[cr + 1 : cr + 1 + MAX_LINE]


_PREFILTERS: dict[tuple[int, str], Prefilter] = {}
_PREFILTERS_LOCK = threading.Lock()


def prefilter_for(index: KbIndex, engine: str | None = None) -> Prefilter:
    """The fastest prefilter available (DENPEX_KB_PREFILTER=re2 forces the portable one)."""
    engine = engine or os.environ.get("DENPEX_KB_PREFILTER", "auto")
    key = (id(index), engine)
    with _PREFILTERS_LOCK:  # threads scanning at once share one compiled prefilter
        if key not in _PREFILTERS:
            literals = set(index.prefilter_anchors) | set(GENERIC_MARKERS) | set(VERSION_MARKERS)
            _PREFILTERS[key] = make_prefilter(sorted(literals), engine)
        return _PREFILTERS[key]


def _is_big_plain_file(fh: Any) -> bool:
    if not isinstance(fh, io.BufferedReader):
        return False
    st = os.fstat(fh.fileno())
    return stat.S_ISREG(st.st_mode) and st.st_size >= PARALLEL_MIN


def _open(path: Path) -> BinaryIO:
    try:
        st = path.stat()
    except FileNotFoundError:
        raise ScanError(f"{path}: no such file") from None
    except OSError as exc:
        raise ScanError(f"{path}: {exc.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise ScanError(f"{path}: is a directory; give the log files inside it")
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        # /dev/zero, /dev/urandom, a disk: endless or not a log. (A terminal on stdin is read as usual.)
        raise ScanError(f"{path}: is a device, not a log file; give a log file (or pipe the log on stdin)")
    try:
        if stat.S_ISFIFO(st.st_mode):
            fh: BinaryIO = _open_fifo(path)
        else:
            fh = open(path, "rb")  # noqa: SIM115
    except PermissionError:
        raise ScanError(f"{path}: permission denied") from None
    except OSError as exc:
        raise ScanError(f"{path}: {exc.strerror}") from None
    try:
        return _decoded(fh, str(path), owned=True, seekable=stat.S_ISREG(st.st_mode))
    except BaseException:
        fh.close()
        raise


# Compressed or archived input, told by its first bytes (never by the file name): decompressed where the
# standard library can, refused with a message otherwise, so that "no failure found" is only ever said of text.
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bzip2"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\x04\x22\x4d\x18", "lz4"),
    (b"PK\x03\x04", "zip"),
    (b"7z\xbc\xaf\x27\x1c", "7z"),
)
_HEAD = max(len(m) for m, _ in _MAGIC)


def _codec(head: bytes) -> str | None:
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            if kind == "bzip2" and not (len(head) >= 4 and head[3:4] in b"123456789"):
                continue  # "BZh" then a block size digit; a log line may well start with "BZh..."
            return kind
    return None


class _Decoded(io.RawIOBase):
    """A decompressing reader that closes what it reads from (when it owns it)."""

    def __init__(self, reader: Any, owned: Any, kind: str) -> None:
        self.reader = reader
        self.owned = owned
        self.kind = kind

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        data: bytes = self.reader.read(n)
        return data

    def read1(self, n: int = -1) -> bytes:
        data: bytes = self.reader.read1(n) if hasattr(self.reader, "read1") else self.reader.read(n)
        return data

    def close(self) -> None:
        try:
            self.reader.close()
        finally:
            if self.owned is not None:
                self.owned.close()
            super().close()


def _decoded(fh: Any, name: str, *, owned: bool, seekable: bool = False) -> BinaryIO:
    """`fh`, decompressed when its first bytes say it is gzip, bzip2 or xz; ScanError for a format that is
    not read (zstd without a decoder, lz4, zip, 7z)."""
    parts: list[bytes] = []
    got = 0
    while got < _HEAD:  # a pipe may hand over fewer bytes than asked
        part = fh.read(_HEAD - got)
        if not part:
            break
        parts.append(part)
        got += len(part)
    head = b"".join(parts)
    if seekable:
        fh.seek(0)
        src: Any = fh
    else:
        src = _Prepend(head, fh, owned=owned)
    kind = _codec(head)
    if kind is None:
        return src  # type: ignore[no-any-return]
    if kind == "gzip":
        reader: Any = gzip.GzipFile(fileobj=src)
    elif kind == "bzip2":
        import bz2

        reader = bz2.BZ2File(src)
    elif kind == "xz":
        import lzma

        reader = lzma.LZMAFile(src)  # noqa: SIM115 - returned open; _Decoded closes it
    elif kind == "zstd":
        try:
            import zstandard
        except ImportError:
            raise ScanError(
                f"{name}: zstd-compressed, and no zstd decoder is installed; decompress it first "
                f"(zstd -dc FILE | denpex-kb scan -) or pip install zstandard"
            ) from None
        reader = zstandard.ZstdDecompressor().stream_reader(src, read_across_frames=True)
    else:
        raise ScanError(f"{name}: {'an lz4-compressed stream' if kind == 'lz4' else f'a {kind} archive'}, not a log; "
                        "extract the log first")
    return _Decoded(reader, src if owned else None, kind)  # type: ignore[return-value]


FIFO_WAIT = 60.0  # seconds a named pipe may stay without a writer (DENPEX_KB_FIFO_WAIT overrides)


def _open_fifo(path: Path) -> BinaryIO:
    """A named pipe, opened without blocking: a pipe that no process ever opens for writing would otherwise hang
    the scan forever. Waits up to FIFO_WAIT seconds for the first data (or a writer that closes)."""
    import select

    try:
        wait = float(os.environ.get("DENPEX_KB_FIFO_WAIT", FIFO_WAIT))
    except ValueError:
        wait = FIFO_WAIT
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLHUP)
        if not poller.poll(max(wait, 0) * 1000):
            raise ScanError(f"{path}: a named pipe that nothing wrote to within {wait:g} s (DENPEX_KB_FIFO_WAIT sets the wait)")
        os.set_blocking(fd, True)
        return open(fd, "rb", closefd=True)
    except BaseException:
        os.close(fd)
        raise


def refuse_endless_stdin(fh: Any) -> None:
    """Raise ScanError when stdin is a device that never ends (stdin < /dev/zero); a terminal or /dev/null is fine."""
    try:
        fd = fh.fileno()
        st = os.fstat(fd)
    except (AttributeError, OSError, ValueError):
        return
    if not stat.S_ISCHR(st.st_mode) or os.isatty(fd):
        return
    try:
        null = os.stat(os.devnull)
    except OSError:
        return
    if st.st_rdev != null.st_rdev:
        raise ScanError("stdin is a device, not a log (e.g. /dev/zero); give a log file or pipe the log in")


class _Prepend(io.RawIOBase):
    """A stream whose first bytes were already read to sniff for compression."""

    def __init__(self, head: bytes, rest: BinaryIO, owned: bool = True) -> None:
        self.head = head
        self.rest = rest
        self.owned = owned

    def readable(self) -> bool:
        return True

    def read(self, n: int | None = -1) -> bytes:
        if self.head:
            out, self.head = self.head, b""
            if n is None or n < 0:
                return out + self.rest.read()
            if n < len(out):
                out, self.head = out[:n], out[n:]
                return out
            return out + self.rest.read(n - len(out)) if n > len(out) else out
        return self.rest.read(n)  # type: ignore[arg-type]  # None reads to the end, as io's readers take it

    def close(self) -> None:
        if self.owned:
            self.rest.close()
        super().close()


def _read_block(fh: BinaryIO) -> tuple[bytes, ScanError | None]:
    """Up to CHUNK bytes. A compressed stream is read in small steps, so that a truncated or corrupt one
    keeps what came before the damage."""
    if not isinstance(fh, (gzip.GzipFile, _Decoded)):
        try:
            return fh.read(CHUNK) or b"", None
        except OSError as exc:
            return b"", ScanError(f"the log could not be read ({exc}); findings cover what was read")
    parts: list[bytes] = []
    size = 0
    while size < CHUNK:
        try:
            part = fh.read1(min(1 << 20, CHUNK - size))
        except Exception as exc:  # noqa: BLE001 - EOFError, OSError, lzma.LZMAError, zstd errors: a damaged stream
            return b"".join(parts), ScanError(f"the log is truncated or corrupt ({exc}); findings cover what was read")
        if not part:
            break
        parts.append(part)
        size += len(part)
    return b"".join(parts), None


def _chunks(fh: BinaryIO, limit: int | None, on_bytes: Callable[[int], None] | None, errors: list[ScanError]) -> Iterator[bytes]:
    """Chunks that end at a line break (the last one may not), with over-long lines cut to MAX_LINE bytes.
    `limit`: stop after this many bytes (a worker's share of a file)."""
    carry = b""
    left = limit
    while True:
        block, error = _read_block(fh)
        if left is not None:
            block = block[:left]
            left -= len(block)
        if on_bytes and block:
            on_bytes(len(block))
        if error is not None:
            errors.append(error)
        if not block or error is not None:
            data = carry + block
            if data:
                yield data
            return
        data = carry + block if carry else block
        cut = data.rfind(b"\n")
        if cut < 0:
            # One line longer than a chunk: keep its start (what a signature can need) and its last `\r`
            # segment, drop the rest.
            carry = _keep_ends(data)
            continue
        yield data[: cut + 1] if cut + 1 < len(data) else data
        carry = data[cut + 1 :]
        if len(carry) > MAX_LINE * 4:
            carry = _keep_ends(carry)


_NUMPY_FROM = 1 << 20  # below this, bytes.count is as fast and numpy's import is not worth it
_SCRATCH = threading.local()  # count_newlines' buffer: one per thread, since threads may scan at once


@lru_cache(maxsize=1)
def _numpy() -> Any:
    try:  # counts line breaks about four times faster than bytes.count
        import numpy

        return numpy
    except ImportError:  # pragma: no cover - numpy is a dependency; keep working without it
        return None


def count_newlines(view: Any) -> int:
    """Line breaks in a bytes-like object (bytes, memoryview of a memory map), without copying big ones."""
    np = _numpy() if len(view) >= _NUMPY_FROM else None
    if np is None:
        return (view if isinstance(view, bytes) else bytes(view)).count(b"\n")
    data = np.frombuffer(view, np.uint8)
    scratch = getattr(_SCRATCH, "eq", None)
    if scratch is None or len(scratch) < len(data):
        scratch = _SCRATCH.eq = np.empty(max(len(data), CHUNK), dtype=bool)  # reused: no page faults per call
    out = scratch[: len(data)]
    np.equal(data, 10, out=out)
    return int(np.count_nonzero(out))


@dataclass
class _Hits:
    """What a pass over raw bytes yields: the candidate lines, and how many lines there were."""

    lines: list[tuple[int, bytes]] = field(default_factory=list)  # (1-based line number, raw line)
    count: int = 0
    error: ScanError | None = None
    # Repeats folded by a worker (see _fold): group key -> [lines, ranks, hosts] beyond the first, which is kept;
    # ranks and hosts as dicts with None values, ordered sets in the order they were seen
    folded: dict[tuple[str, str], list[Any]] = field(default_factory=dict)


def _hits(fh: BinaryIO, prefilter: Prefilter, on_bytes: Callable[[int], None] | None, limit: int | None = None,
          sink: Callable[[int, bytes], None] | None = None, lookback: LookbackPlan | None = None) -> _Hits:
    """Find the candidate lines of a byte stream; each goes to `sink` (or is collected) with its line number."""
    from concurrent.futures import ThreadPoolExecutor

    out = _Hits()
    errors: list[ScanError] = []
    emit = sink or (lambda n, raw: out.lines.append((n, raw)))
    with ThreadPoolExecutor(max_workers=2 if prefilter.threaded else 1) as pool:
        # With RE2 (which releases the GIL) the next chunk is searched while this one's hits are matched.
        pending: list[Any] = []
        chunks = _chunks(fh, limit, on_bytes, errors)

        def submit() -> None:
            chunk = next(chunks, None)
            if chunk is not None:
                pending.append((chunk, pool.submit(prefilter.spans, chunk)))

        submit()
        submit()
        while pending:
            chunk, future = pending.pop(0)
            spans = future.result()
            submit()
            if lookback:
                spans = lookback.extend(chunk, spans, 0, len(chunk))
            counted = 0
            number = out.count
            view = memoryview(chunk)
            for start, end in spans:
                # bytes.count over a range copies nothing; numpy only pays off on long stretches
                number += (chunk.count(b"\n", counted, start) if start - counted < _NUMPY_FROM
                           else count_newlines(view[counted:start]))
                counted = start
                emit(number + 1, chunk[start : min(end, start + MAX_LINE)])
            out.count += count_newlines(view)
            if chunk and not chunk.endswith(b"\n"):
                out.count += 1
    out.error = errors[0] if errors else None
    return out


def _scan_stream(
    fh: BinaryIO, collector: _Collector, prefilter: Prefilter, on_bytes: Callable[[int], None] | None
) -> tuple[int, ScanError | None]:
    found = _hits(fh, prefilter, on_bytes, sink=lambda n, raw: collector.line(raw.decode("utf-8", "replace"), n),
                  lookback=LookbackPlan(collector.index))
    return found.count, found.error


# Big plain files are split across processes: the byte search and the newline count are each bound to one
# core, and a 2 GB log is exactly when the user is waiting.
PARALLEL_MIN = 64 << 20


def _split_points(path: Path, size: int, parts: int) -> list[int]:
    """Offsets that cut the file into `parts` ranges, each starting at the beginning of a line."""
    points = [0]
    with path.open("rb") as fh:
        for i in range(1, parts):
            pos = max(size * i // parts, points[-1])
            fh.seek(pos)
            # Look for the next line start in bounded steps: a giant line just makes one range bigger.
            for _ in range(64):
                block = fh.read(1 << 20)
                cut = block.find(b"\n")
                if not block or cut >= 0:
                    break
                pos += len(block)
            if block and cut >= 0:
                points.append(pos + cut + 1)
    points.append(size)
    return sorted({p for p in points if p <= size})


def _release(mm: Any, done: int, upto: int) -> int:
    """Drop the pages of [done, upto) from this process: read once, they would otherwise count in its RSS for
    the rest of the scan (they stay in the page cache)."""
    upto -= upto % mmap.PAGESIZE
    if upto > done and hasattr(mmap, "MADV_DONTNEED"):
        mm.madvise(mmap.MADV_DONTNEED, done, upto - done)
        return upto
    return done


def _mapped_hits(mm: Any, start: int, end: int, prefilter: Prefilter, lookback: LookbackPlan | None = None,
                 fold: Callable[[list[tuple[int, bytes]]], list[tuple[int, bytes]]] | None = None) -> _Hits:
    """Candidate lines of [start, end) of a memory-mapped file: no copies, windows of CHUNK bytes cut at line
    breaks (a line longer than a window is searched in pieces, each reported with the line's number). A lookback
    may add a line from before the window, even before `start`: its number is then counted back (0 or less
    before `start`; the parent adds the lines of the ranges before)."""
    out = _Hits()
    sent: set[int] = set()
    reach: dict[int, int] = {}  # how far back the lookback has searched the map, per plan
    window: list[tuple[int, bytes]] = []
    view = memoryview(mm)
    counted, lines = start, 0
    released = start - start % mmap.PAGESIZE
    a = start
    while a < end:
        b = min(a + CHUNK, end)
        if b < end:
            cut = mm.rfind(b"\n", a, b)
            b = cut + 1 if cut >= 0 else b
        spans = _line_spans(mm, (a + p for p in prefilter.positions(view[a:b])), lo=a, hi=b)
        if lookback:
            spans = lookback.extend(mm, spans, a, b, floor=0, seen=prefilter.search, sent=sent, reach=reach)
        for line_start, line_end in spans:
            line_end = min(line_end, line_start + MAX_LINE)
            if line_start < counted:  # a leading line from an earlier window: counted back, not forward
                number = lines - count_newlines(view[line_start:counted]) + 1
                window.append((number, bytes(view[line_start:line_end])))
                continue
            lines += count_newlines(view[counted:line_start])
            counted = line_start
            window.append((lines + 1, bytes(view[line_start:line_end])))
        out.lines.extend(fold(window) if fold is not None else window)
        window.clear()
        lines += count_newlines(view[counted:b])
        counted = a = b
        if lookback and lookback.touched is not None and lookback.touched < released:
            _release(mm, lookback.touched - lookback.touched % mmap.PAGESIZE, released)  # read again behind us
        if lookback:
            lookback.touched = None
        released = _release(mm, released, b)
    if end > start and view[end - 1] != 10:
        lines += 1  # the file's last line has no line break
    out.count = lines
    view.release()
    return out


_FORKED: dict[str, Prefilter] = {}  # the parent's prefilter, inherited by the forked workers (no recompile)
_FORKED_INDEX: dict[str, KbIndex] = {}  # and its index, for folding repeats in the workers
_FORKED_RANK: dict[str, int | None] = {}  # and the rank the file's path names


def _range_worker(path: str, start: int, end: int, key: str = "prefilter") -> _Hits:
    prefilter = _FORKED[key]
    with open(path, "rb") as fh:
        end = min(end, os.fstat(fh.fileno()).st_size)
        # A file truncated while mapped kills this worker with SIGBUS; the parent then reads it the safe way.
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            index = _FORKED_INDEX.get(key)
            if index is None:
                return _mapped_hits(mm, start, end, prefilter)
            folded: dict[tuple[str, str], list[Any]] = {}
            hits = _mapped_hits(mm, start, end, prefilter, LookbackPlan(index),
                                _Folder(index, _FORKED_RANK.get(key), folded))
            hits.folded = folded
            return hits


_NOTHING = ("", "")  # _Folder's mark for a line that would leave no trace in the parent's report


def _exception_or_header(text: str) -> bool:
    """Whether the collector would keep the line for its tracebacks or bare exceptions."""
    return bool(text) and (text.startswith(TRACEBACK) or exception_type(text) is not None)


class _Folder:
    """Repeats folded where they are found, so a log in which every line is a failure does not send every line
    to the parent: a line a signature names, that no fingerprint or version reader needs to see, and whose
    group (entry, masked text) this worker has already sent once, only adds its count, rank and host. The
    parent's report is the same as if it had read every line: a repeat only ever does that to its group. Fed a
    window at a time, so a worker never holds more than one window's candidate lines."""

    def __init__(self, index: KbIndex, path_rank: int | None, folded: dict[tuple[str, str], list[Any]]) -> None:
        self.index = index
        self.path_rank = path_rank
        self.folded = folded
        self.seen: set[tuple[str, str]] = set()
        self.events = [ev for fp in index.fingerprints for ev in fp.events]
        # text -> its group; None: sent whole; _NOTHING: a line the parent would do nothing with
        self.memo: dict[str, tuple[str, str] | None] = {}

    def _group(self, text: str) -> tuple[str, str] | None:
        if text not in self.memo:
            found = _classify(self.index, text) if text else None
            followed = (any(marker in text for marker in VERSION_MARKERS)
                        or any(ev.matches(text) for ev in self.events))
            if found is not None and not followed:
                group: tuple[str, str] | None = (found[0].entry.id, mask_line(text))
            elif found is None and not followed and not _exception_or_header(text):
                group = _NOTHING  # an anchor hit no signature confirmed, in no traceback: nothing to report
            else:
                group = None
            if len(self.memo) >= MEMO_LINES:
                self.memo.clear()
            self.memo[text] = group
        return self.memo[text]

    def __call__(self, lines: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
        kept: list[tuple[int, bytes]] = []
        for number, raw in lines:
            line = strip_prefixes(raw.decode("utf-8", "replace"))
            group = self._group(line.text)
            if group is _NOTHING:
                continue
            if group is None or group not in self.seen:
                if group is not None:
                    self.seen.add(group)
                kept.append((number, raw))
                continue
            rank = line.rank if line.rank is not None else self.path_rank
            extra = self.folded.setdefault(group, [0, {}, {}])  # count, ranks, hosts (dicts: ordered sets)
            extra[0] += 1
            if rank is not None and len(extra[1]) < MAX_RANKS:
                extra[1].setdefault(rank)
            if line.host and len(extra[2]) < MAX_HOSTS:
                extra[2].setdefault(line.host)
        return kept


def _usable_cpus() -> int:
    """The CPUs this process may run on (taskset, a container's cpuset), not the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


TASK_BYTES = 32 << 20  # a worker's task: results come back, and are read, a task at a time


def _scan_parallel(path: Path, size: int, collector: _Collector, prefilter: Prefilter,
                   on_bytes: Callable[[int], None] | None) -> tuple[int, ScanError | None] | None:
    """The file in ranges of about TASK_BYTES, read by worker processes, their results taken in order as they
    come (at most a few tasks' results held at once, whatever the file's size). None when nothing could be read
    this way (the caller then reads the file plainly); a failure after some ranges were taken reads the rest
    plainly from where they end."""
    import multiprocessing
    from concurrent.futures import Future, ProcessPoolExecutor

    workers = min(_usable_cpus(), 8)
    if workers < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return None
    points = _split_points(path, size, max(workers, -(-size // TASK_BYTES)))
    ranges = list(pairwise(points))
    key = f"prefilter-{threading.get_ident()}"  # per calling thread: another thread's scan must not clear it
    _FORKED[key] = prefilter
    _FORKED_INDEX[key] = collector.index
    _FORKED_RANK[key] = collector.path_rank
    _numpy()  # imported once here, inherited by every worker
    offset, done = 0, 0  # lines and bytes taken so far
    try:
        with ProcessPoolExecutor(min(workers, len(ranges)), mp_context=multiprocessing.get_context("fork")) as pool:
            pending: list[Future[_Hits]] = []
            for k in range(len(ranges)):
                while len(pending) <= workers and k + len(pending) < len(ranges):
                    a, b = ranges[k + len(pending)]
                    pending.append(pool.submit(_range_worker, str(path), a, b, key))
                part = pending.pop(0).result()
                for number, raw in part.lines:
                    collector.line(raw.decode("utf-8", "replace"), offset + number)
                collector.add_folded(part.folded)
                offset += part.count
                done = ranges[k][1]
                if on_bytes:
                    on_bytes(ranges[k][1] - ranges[k][0])
    except Exception:  # noqa: BLE001 - a worker died (file truncated under us, no memory map): read plainly
        if done == 0:
            return None
        return _rest_plainly(path, done, offset, collector, prefilter, on_bytes)
    finally:
        _FORKED.pop(key, None)
        _FORKED_INDEX.pop(key, None)
        _FORKED_RANK.pop(key, None)
    return offset, None


def _rest_plainly(path: Path, start: int, lines: int, collector: _Collector, prefilter: Prefilter,
                  on_bytes: Callable[[int], None] | None) -> tuple[int, ScanError | None]:
    """Read a file from byte `start` (a line start, after `lines` lines) in this process."""
    with open(path, "rb") as fh:
        fh.seek(start)
        found = _hits(fh, prefilter, on_bytes,
                      sink=lambda n, raw: collector.line(raw.decode("utf-8", "replace"), lines + n),
                      lookback=LookbackPlan(collector.index))
    return lines + found.count, found.error


def _sniff_file(path: Path, collector: _Collector) -> None:
    if collector.start is not None or not path.is_file():  # a pipe would lose what the sniff reads
        return
    try:
        with _open(path) as fh:
            head = fh.read(SNIFF_BYTES)
    except (OSError, ScanError, EOFError):
        return  # the main pass reports what is wrong with the file
    for raw in head.decode("utf-8", "replace").splitlines()[:SNIFF_LINES]:
        collector.sniff_start(raw)
        if collector.start is not None:
            return


def _segments(raw: str) -> Iterator[str]:
    """A line's carriage-return segments, each cut to MAX_LINE characters."""
    if "\r" not in raw:
        yield raw[:MAX_LINE]
        return
    start = 0
    while start <= len(raw):
        cr = raw.find("\r", start)
        end = len(raw) if cr < 0 else cr
        if end > start:
            yield raw[start : min(end, start + MAX_LINE)]
        if cr < 0:
            return
        start = cr + 1


def scan(source: Source, *, index: KbIndex | None = None, progress: Callable[[int], None] | None = None,
         versions: Mapping[str, str] | None = None) -> ScanReport:
    """Scan a log: a path or a binary file object (plain, gzip, bzip2 or xz, told by the first bytes), or an
    iterable of lines (str or bytes). `versions` (package -> version, e.g. read from `collect_env` output) add to
    the versions the log prints, and win over them."""
    return scan_many([source], index=index, progress=progress, versions=versions)


def _as_source(src: Any) -> Any:
    """What scan accepts, made uniform: log bytes become a binary stream, a text stream an iterable of lines;
    anything else is a clear TypeError rather than an error from deep inside."""
    if isinstance(src, (bytes, bytearray, memoryview)):
        return io.BytesIO(bytes(src))
    if isinstance(src, io.TextIOWrapper):
        return src.buffer  # a text file: its bytes, so compression is still recognised
    if isinstance(src, io.TextIOBase):
        return (line for line in src)  # any other text stream (StringIO) yields its lines (iter() would be itself)
    if isinstance(src, (str, os.PathLike)) or hasattr(src, "read") or isinstance(src, Iterable):
        return src
    raise TypeError(
        "scan() takes a path, the log's bytes, a binary or text file object, or an iterable of lines; "
        f"not {type(src).__name__}"
    )


def scan_many(sources: list[Source], *, index: KbIndex | None = None, progress: Callable[[int], None] | None = None,
              versions: Mapping[str, str] | None = None) -> ScanReport:
    """Scan several logs (e.g. one per rank) as one job. Paths are read in sorted order, so the report does not
    depend on the order they were given in."""
    if isinstance(sources, (str, bytes, bytearray, memoryview, os.PathLike)) or not isinstance(sources, Iterable):
        raise TypeError("scan_many takes a list of sources")
    sources = [_as_source(s) for s in sources]
    index = index or default_index()
    collector = _Collector(index, given_versions=versions)
    prefilter = prefilter_for(index)
    deferred = index.deferred_anchors  # lines of an iterable are read one by one: no lookback needed
    total = 0
    names: list[str] = []
    paths = sorted((s for s in sources if isinstance(s, (str, os.PathLike))), key=lambda p: str(p))
    others = [s for s in sources if not isinstance(s, (str, os.PathLike))]
    # TorchElastic error files, given or lying beside per-rank logs: read as the rank's own report (elastic.py)
    from . import elastic

    logs = [str(p) for p in paths if rank_from_path(str(p)) is not None]
    error_files = sorted({*(str(p) for p in paths if elastic.is_error_file(p)), *elastic.beside(logs)})
    paths = [p for p in paths if not elastic.is_error_file(p)]
    errors: list[ScanError] = []
    unopened: list[ScanError] = []  # files that could not be opened; the others of the job are still scanned
    for file_no, src in enumerate([*paths, *others]):
        if isinstance(src, (str, os.PathLike)) or hasattr(src, "read"):
            if hasattr(src, "read"):
                refuse_endless_stdin(src)
                name, fh, owned = "<stdin>", _decoded(src, "<stdin>", owned=False), False
            else:
                try:
                    name, fh, owned = str(src), _open(Path(src)), True
                except ScanError as exc:
                    if len(sources) == 1:
                        raise
                    unopened.append(exc)
                    errors.append(exc)
                    continue
            collector.begin_file(file_no, name, rank_from_path(name) if owned else None)
            names.append(name)
            if owned:
                _sniff_file(Path(src), collector)  # type: ignore[arg-type]
            try:
                result = None
                if owned and _is_big_plain_file(fh):
                    result = _scan_parallel(Path(src), os.fstat(fh.fileno()).st_size, collector, prefilter, progress)  # type: ignore[arg-type]
                count, err = result or _scan_stream(fh, collector, prefilter, progress)
            finally:
                if owned:
                    fh.close()
            total += count
            if err is not None:
                errors.append(err)
        else:
            collector.begin_file(file_no, None, None)
            names.append("<lines>")
            number = 0
            for number, item in enumerate(cast("Iterable[str | bytes]", src), 1):
                raw = item.decode("utf-8", "replace") if isinstance(item, bytes) else item
                for segment in _segments(raw.rstrip("\r\n")):  # as in files: each `\r` segment on its own
                    if number <= SNIFF_LINES and collector.start is None:
                        collector.sniff_start(segment)
                    if prefilter.search(segment.encode("utf-8", "replace")) or any(a in segment for a in deferred):
                        collector.line(segment, number)
            total += number
    for number_of_file, path in enumerate(error_files, len(paths) + len(others)):
        lines = elastic.read_error_file(path)
        if lines is None:
            errors.append(ScanError(f"{path}: not a TorchElastic error file"))
            continue
        collector.begin_file(number_of_file, path, rank_from_path(os.path.join(os.path.dirname(path), "stderr.log")),
                             error_file=True)
        names.append(path)
        for number, raw in enumerate(lines, 1):
            collector.line(raw, number)
    if unopened and not names:  # nothing at all was read: no report would be true
        raise ScanError("; ".join(str(e) for e in unopened))
    report = collector.report(total, names)
    report.errors = [str(e) for e in errors] + report.errors
    return report
