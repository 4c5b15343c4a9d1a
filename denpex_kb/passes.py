"""Passes over a log's bytes that find its candidate lines (those the prefilter says hold an anchor): over a stream
in this process, or, for a big plain file, over ranges of its memory map in worker processes that fold repeats
where they find them. Each hands its lines, with their numbers, to a `LineSink` (the scan's collector).
"""

from __future__ import annotations

import io
import mmap
import os
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from . import reading
from .bundle import KbIndex
from .limits import MAX_HOSTS, MAX_RANKS, MEMO_LINES
from .lookback import LookbackPlan
from .masks import mask_line
from .matcher import classify_line
from .normalize import MAX_LINE, TRACEBACK, exception_type, strip_prefixes
from .prefilter import Prefilter
from .prefilter import line_spans as _line_spans
from .report import ScanError
from .versions import MARKERS as VERSION_MARKERS


class LineSink(Protocol):
    """What a pass feeds: the scan's per-line logic (`scanner._Collector`)."""

    index: KbIndex
    path_rank: int | None

    def feed(self, raw: str, number: int) -> None: ...

    def add_folded(self, folded: dict[tuple[str, str], list[Any]]) -> None: ...


@dataclass
class Hits:
    """What a pass over raw bytes yields: the candidate lines, and how many lines there were."""

    lines: list[tuple[int, bytes]] = field(default_factory=list)  # (1-based line number, raw line)
    count: int = 0
    error: ScanError | None = None
    # Repeats folded by a worker (see Folder): group key -> [lines, ranks, hosts] beyond the first, which is kept;
    # ranks and hosts as dicts with None values, ordered sets in the order they were seen
    folded: dict[tuple[str, str], list[Any]] = field(default_factory=dict)


def stream_hits(fh: BinaryIO, prefilter: Prefilter, on_bytes: Callable[[int], None] | None, limit: int | None = None,
          sink: Callable[[int, bytes], None] | None = None, lookback: LookbackPlan | None = None) -> Hits:
    """Find the candidate lines of a byte stream; each goes to `sink` (or is collected) with its line number."""
    from concurrent.futures import ThreadPoolExecutor

    out = Hits()
    errors: list[ScanError] = []
    emit = sink or (lambda n, raw: out.lines.append((n, raw)))
    with ThreadPoolExecutor(max_workers=2 if prefilter.threaded else 1) as pool:
        # With RE2 (which releases the GIL) the next chunk is searched while this one's hits are matched.
        pending: list[Any] = []
        chunks = reading.read_chunks(fh, limit, on_bytes, errors)

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
                number += (chunk.count(b"\n", counted, start) if start - counted < reading.NUMPY_FROM
                           else reading.count_newlines(view[counted:start]))
                counted = start
                emit(number + 1, chunk[start : min(end, start + MAX_LINE)])
            out.count += reading.count_newlines(view)
            if chunk and not chunk.endswith(b"\n"):
                out.count += 1
    out.error = errors[0] if errors else None
    return out


def scan_stream(
    fh: BinaryIO, collector: LineSink, prefilter: Prefilter, on_bytes: Callable[[int], None] | None
) -> tuple[int, ScanError | None]:
    found = stream_hits(fh, prefilter, on_bytes, sink=lambda n, raw: collector.feed(raw.decode("utf-8", "replace"), n),
                  lookback=LookbackPlan(collector.index))
    return found.count, found.error


# Big plain files are split across processes: the byte search and the newline count are each bound to one


def is_big_plain_file(fh: Any) -> bool:
    if not isinstance(fh, io.BufferedReader):
        return False
    st = os.fstat(fh.fileno())
    return stat.S_ISREG(st.st_mode) and st.st_size >= PARALLEL_MIN



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


def mapped_hits(mm: Any, start: int, end: int, prefilter: Prefilter, lookback: LookbackPlan | None = None,
                 fold: Callable[[list[tuple[int, bytes]]], list[tuple[int, bytes]]] | None = None) -> Hits:
    """Candidate lines of [start, end) of a memory-mapped file: no copies, windows of reading.CHUNK bytes cut at line
    breaks (a line longer than a window is searched in pieces, each reported with the line's number). A lookback
    may add a line from before the window, even before `start`: its number is then counted back (0 or less
    before `start`; the parent adds the lines of the ranges before)."""
    out = Hits()
    sent: set[int] = set()
    reach: dict[int, int] = {}  # how far back the lookback has searched the map, per plan
    window: list[tuple[int, bytes]] = []
    view = memoryview(mm)
    counted, lines = start, 0
    released = start - start % mmap.PAGESIZE
    a = start
    while a < end:
        b = min(a + reading.CHUNK, end)
        if b < end:
            cut = mm.rfind(b"\n", a, b)
            b = cut + 1 if cut >= 0 else b
        spans = _line_spans(mm, (a + p for p in prefilter.positions(view[a:b])), lo=a, hi=b)
        if lookback:
            spans = lookback.extend(mm, spans, a, b, floor=0, seen=prefilter.search, sent=sent, reach=reach)
        breaks = reading.Newlines(view[a:b])
        for line_start, line_end in spans:
            line_end = min(line_end, line_start + MAX_LINE)
            if line_start < counted:  # a leading line from an earlier window: counted back, not forward
                number = lines - reading.count_newlines(view[line_start:counted]) + 1
                window.append((number, bytes(view[line_start:line_end])))
                continue
            lines += breaks.between(counted - a, line_start - a)
            counted = line_start
            window.append((lines + 1, bytes(view[line_start:line_end])))
        out.lines.extend(fold(window) if fold is not None else window)
        window.clear()
        lines += breaks.between(counted - a, b - a)
        del breaks
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


def range_worker(path: str, start: int, end: int, key: str = "prefilter") -> Hits:
    prefilter = _FORKED[key]
    with open(path, "rb") as fh:
        end = min(end, os.fstat(fh.fileno()).st_size)
        # A file truncated while mapped kills this worker with SIGBUS; the parent then reads it the safe way.
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            index = _FORKED_INDEX.get(key)
            if index is None:
                return mapped_hits(mm, start, end, prefilter)
            folded: dict[tuple[str, str], list[Any]] = {}
            hits = mapped_hits(mm, start, end, prefilter, LookbackPlan(index),
                                Folder(index, _FORKED_RANK.get(key), folded))
            hits.folded = folded
            return hits


# Raw lines remembered whole (by the workers' folders and the collector): lines up to MEMO_RAW_BYTES long, at
# most MEMO_RAW_LINES at a time (a few MiB for typical lines, 16 MiB at worst). More than MEMO_LINES: a log's
# distinct raw lines are its distinct texts times its ranks and prefix styles.
MEMO_RAW_BYTES = 1024
MEMO_RAW_LINES = 1 << 14
_NOTHING = ("", "")  # Folder's mark for a line that would leave no trace in the parent's report


def _exception_or_header(text: str) -> bool:
    """Whether the collector would keep the line for its tracebacks or bare exceptions."""
    return bool(text) and (text.startswith(TRACEBACK) or exception_type(text) is not None)


class Folder:
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
        # text -> its group; None: sent whole; _NOTHING: a line the parent would do nothing with
        self.memo: dict[str, tuple[str, str] | None] = {}
        # raw line -> (its group, rank, host): a log repeats whole lines, prefix and all (every step, every rank),
        # and a repeat then costs one look-up instead of decoding and stripping prefixes again
        self.raw_memo: dict[bytes, tuple[Any, int | None, str | None]] = {}

    def _group(self, text: str) -> tuple[str, str] | None:
        if text not in self.memo:
            found = classify_line(self.index, text) if text else None
            followed = (any(marker in text for marker in VERSION_MARKERS)
                        or any(any(hits) for _k, hits in self.index.fingerprint_events(text)))
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
        raw_memo = self.raw_memo
        for number, raw in lines:
            facts = raw_memo.get(raw)
            if facts is None:
                line = strip_prefixes(raw.decode("utf-8", "replace"))
                facts = (self._group(line.text), line.rank if line.rank is not None else self.path_rank, line.host)
                if len(raw) <= MEMO_RAW_BYTES:
                    if len(raw_memo) >= MEMO_RAW_LINES:
                        raw_memo.clear()
                    raw_memo[raw] = facts
            group, rank, host = facts
            if group is _NOTHING:
                continue
            if group is None or group not in self.seen:
                if group is not None:
                    self.seen.add(group)
                kept.append((number, raw))
                continue
            extra = self.folded.setdefault(group, [0, {}, {}])  # count, ranks, hosts (dicts: ordered sets)
            extra[0] += 1
            if rank is not None and len(extra[1]) < MAX_RANKS:
                extra[1].setdefault(rank)
            if host and len(extra[2]) < MAX_HOSTS:
                extra[2].setdefault(host)
        return kept


def _usable_cpus() -> int:
    """The CPUs this process may run on (taskset, a container's cpuset), not the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


TASK_BYTES = 32 << 20  # a worker's task: results come back, and are read, a task at a time


def scan_parallel(path: Path, size: int, collector: LineSink, prefilter: Prefilter,
                   on_bytes: Callable[[int], None] | None) -> tuple[int, ScanError | None] | None:
    """The file in ranges of about TASK_BYTES, read by worker processes, their results taken in order as they
    come (at most a few tasks' results held at once, whatever the file's size). None when nothing could be read
    this way (the caller then reads the file plainly); a failure after some ranges were taken reads the rest
    plainly from where they end."""
    import multiprocessing
    from concurrent.futures import Future, ProcessPoolExecutor

    # On one CPU a single worker still pays: it reads the memory map without the copies of the stream path
    # (read, join with the carried line, slice), and folds repeats while this process matches what it sent.
    workers = min(_usable_cpus(), 8)
    if "fork" not in multiprocessing.get_all_start_methods():
        return None
    points = _split_points(path, size, max(workers, -(-size // TASK_BYTES)))
    ranges = list(pairwise(points))
    key = f"prefilter-{threading.get_ident()}"  # per calling thread: another thread's scan must not clear it
    _FORKED[key] = prefilter
    _FORKED_INDEX[key] = collector.index
    _FORKED_RANK[key] = collector.path_rank
    reading.numpy_module()  # imported once here, inherited by every worker
    offset, done = 0, 0  # lines and bytes taken so far
    try:
        with ProcessPoolExecutor(min(workers, len(ranges)), mp_context=multiprocessing.get_context("fork")) as pool:
            pending: list[Future[Hits]] = []
            for k in range(len(ranges)):
                while len(pending) <= workers and k + len(pending) < len(ranges):
                    a, b = ranges[k + len(pending)]
                    pending.append(pool.submit(range_worker, str(path), a, b, key))
                part = pending.pop(0).result()
                for number, raw in part.lines:
                    collector.feed(raw.decode("utf-8", "replace"), offset + number)
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


def _rest_plainly(path: Path, start: int, lines: int, collector: LineSink, prefilter: Prefilter,
                  on_bytes: Callable[[int], None] | None) -> tuple[int, ScanError | None]:
    """Read a file from byte `start` (a line start, after `lines` lines) in this process."""
    with open(path, "rb") as fh:
        fh.seek(start)
        found = stream_hits(fh, prefilter, on_bytes,
                      sink=lambda n, raw: collector.feed(raw.decode("utf-8", "replace"), lines + n),
                      lookback=LookbackPlan(collector.index))
    return lines + found.count, found.error
