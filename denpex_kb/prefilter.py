"""Prefilters: one multi-literal search over raw log bytes, so that only the few lines holding an anchor are
decoded and matched. Each engine is a small class registered by name; `auto` takes the first registered engine
that builds on this machine (Hyperscan where its wheel and the CPU allow, else RE2).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import re2


class Prefilter(Protocol):
    """A multi-literal search over raw bytes: whether a buffer holds any literal, and where."""

    name: str
    threaded: bool  # whether searching chunks in threads helps (the engine releases the GIL)

    def search(self, data: bytes) -> bool: ...

    def positions(self, data: Any) -> list[int]:
        """Where the literals occur in `data` (bytes or a buffer), ascending."""
        ...

    def spans(self, chunk: bytes) -> list[tuple[int, int]]:
        """(start, end) of each line of `chunk` that holds a literal."""
        ...


class _Spans:
    def positions(self, data: Any) -> list[int]:
        raise NotImplementedError

    def spans(self, chunk: bytes) -> list[tuple[int, int]]:
        """(start, end) of each line of `chunk` that holds a literal."""
        return line_spans(chunk, self.positions(chunk))


class Re2Prefilter(_Spans):
    """One multi-literal RE2 search per chunk. Portable; RE2 releases the GIL, so chunks overlap in threads."""

    name = "re2"
    threaded = True

    def __init__(self, literals: list[str]) -> None:
        options = re2.Options()
        options.max_mem = 256 << 20  # a big DFA cache keeps the multi-literal search at full speed
        self.pattern = re2.compile(b"|".join(re2.escape(a.encode("utf-8")) for a in literals), options)

    def search(self, data: bytes) -> bool:
        return self.pattern.search(data) is not None

    def positions(self, data: Any) -> list[int]:
        """Where prefilter literals occur in `data` (bytes or a buffer), ascending."""
        return [m.start() for m in self.pattern.finditer(bytes(data) if isinstance(data, memoryview) else data)]


class HyperscanPrefilter(_Spans):
    """The same search with Hyperscan's SIMD literal matcher, several times faster where its wheel exists."""

    name = "hyperscan"
    threaded = False  # the search holds the GIL: no gain from searching the next chunk in another thread

    def __init__(self, literals: list[str]) -> None:
        import hyperscan

        self.db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        encoded = [a.encode("utf-8") for a in literals]
        self.db.compile(expressions=encoded, ids=list(range(len(encoded))), elements=len(encoded), flags=0, literal=True)
        # A scratch space may be used by one scan at a time (else ScratchInUseError): one per thread, cloned
        # from the database's own, so `scan` can be called from many threads at once.
        self._prototype = hyperscan.Scratch(self.db)
        self._clone_lock = threading.Lock()
        self._local = threading.local()

    def _scratch(self) -> Any:
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            with self._clone_lock:
                scratch = self._local.scratch = self._prototype.clone()
        return scratch

    def _ends(self, data: Any, most: int) -> tuple[list[int], bool]:
        """End offsets of the first `most` matches in `data`, and whether the scan stopped there."""
        import hyperscan

        ends: list[int] = []

        def on_match(_id: int, _start: int, end: int, _flags: int, _ctx: Any) -> bool:
            ends.append(end)
            return len(ends) >= most  # True stops the scan

        try:
            self.db.scan(data, match_event_handler=on_match, scratch=self._scratch())
        except hyperscan.ScanTerminated:
            return ends, True
        return ends, False

    def search(self, data: bytes) -> bool:
        return bool(self._ends(data, 1)[0])

    def positions(self, data: Any) -> list[int]:
        ends, stopped = self._ends(data, MAX_MATCHES)
        found = [e - 1 for e in sorted(ends)]
        if not stopped:
            return found
        # A buffer dense with matches (every line holding many anchors): one match per line segment is all the
        # line spans need, so scan on from the next line break, one segment at a time, instead of collecting
        # every match (millions of callbacks and list items).
        view = data if isinstance(data, memoryview) else memoryview(data)
        at = _next_break(view, found[-1]) + 1
        while 0 < at < len(view):
            first, _ = self._ends(view[at:], 1)
            if not first:
                break
            p = at + first[0] - 1
            found.append(p)
            at = _next_break(view, p) + 1
        return found


MAX_MATCHES = 1 << 16  # matches collected from one buffer before scanning on one line segment at a time


def _next_break(view: memoryview, p: int) -> int:
    """The offset of the first line feed or carriage return at or after `p` (-1: none)."""
    step = 1 << 16
    while p < len(view):
        block = view[p : p + step].tobytes()
        cuts = [c for c in (block.find(b"\n"), block.find(b"\r")) if c >= 0]
        if cuts:
            return p + min(cuts)
        p += step
    return -1


def line_spans(chunk: Any, positions: Iterable[int], lo: int = 0, hi: int | None = None) -> list[tuple[int, int]]:
    """(line start, line end) of every line holding one of `positions` (ascending), each line once, within
    chunk[lo:hi] (bytes or an mmap)."""
    hi = len(chunk) if hi is None else hi
    spans: list[tuple[int, int]] = []
    last_end = lo - 1
    for pos in positions:
        if pos <= last_end:
            continue
        start = max(chunk.rfind(b"\n", lo, pos) + 1, lo)
        end = chunk.find(b"\n", pos, hi)
        end = hi if end < 0 else end
        # A carriage return ends a segment as a line break does (a progress bar redrawn in place, with the
        # failure glued after it): each segment is cut to MAX_LINE on its own, so a long bar hides nothing.
        # Searched within the line only, so a chunk without `\r` costs nothing more.
        start = max(start, chunk.rfind(b"\r", start, pos) + 1)
        cr = chunk.find(b"\r", pos, end)
        end = end if cr < 0 else cr
        spans.append((start, end))
        last_end = end
    return spans




# Engines by name, in the order `auto` tries them.
ENGINES: dict[str, Callable[[list[str]], Prefilter]] = {"hyperscan": HyperscanPrefilter, "re2": Re2Prefilter}


def register_engine(name: str, factory: Callable[[list[str]], Prefilter], *, first: bool = False) -> None:
    """Add an engine (a callable taking the literals); `first` makes `auto` try it before the others."""
    global ENGINES
    ENGINES = {name: factory, **{k: v for k, v in ENGINES.items() if k != name}} if first else {**ENGINES, name: factory}


def make_prefilter(literals: list[str], engine: str = "auto") -> Prefilter:
    """The named engine over `literals`; `auto`: the first registered engine that builds here."""
    if engine != "auto":
        if engine not in ENGINES:
            raise ValueError(f"no prefilter engine {engine!r}; known: {', '.join(ENGINES)}")
        return ENGINES[engine](literals)
    for factory in ENGINES.values():
        try:
            return factory(literals)
        except Exception:  # noqa: BLE001 - no wheel for this platform, or a CPU it does not support: try the next
            continue
    raise RuntimeError("no prefilter engine could be built")
