"""Lookback: a fingerprint's leading `info` events, looked for only just before the event that follows them.

An `info` event is healthy output (NCCL_DEBUG=INFO's `Bootstrap : Using ...`, `via P2P/IPC`): present on a large
share of the lines of a healthy multi-node log. Searching the whole log for it would send those lines down the
per-line path, so its anchors stay out of the prefilter. When a candidate line holds an anchor of the event that
follows them (the trigger), the `within` lines before it are searched for the leading events' anchors, and the
lines that hold one join the candidates, ahead of the trigger. A line that holds a trigger's anchors but not the
trigger event itself (another `NCCL WARN`) starts no search: the sequence cannot complete there. A file read in parallel is memory-mapped, so the
search reaches back across windows and workers' ranges; a stream (a pipe, a compressed log) is searched within the
8 MiB chunk being read, so a leading line further back, across a chunk boundary, is not seen there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .bundle import KbIndex
from .normalize import MAX_LINE, strip_prefixes
from .prefilter import line_spans


class LookbackPlan:
    """The lookbacks of one index, with their anchors encoded once."""

    def __init__(self, index: KbIndex) -> None:
        self.touched: int | None = None  # the lowest offset a search has read since the caller last looked
        self.plans = [
            (tuple(t.encode("utf-8") for t in lb.event.anchors), tuple(a.encode("utf-8") for a in lb.anchors), lb.within,
             lb.event)
            for lb in index.lookbacks
        ]

    def __bool__(self) -> bool:
        return bool(self.plans)

    def extend(self, buf: Any, spans: Sequence[tuple[int, int]], lo: int, hi: int, floor: int | None = None,
               seen: Callable[[bytes], bool] | None = None, sent: set[int] | None = None,
               reach: dict[int, int] | None = None) -> list[tuple[int, int]]:
        """`spans` (candidate lines of buf[lo:hi], ascending) plus the lines before each trigger that hold a
        leading event's anchor, ascending and each once. `buf`: bytes or an mmap. The search may reach back to
        `floor` (default `lo`): a line found before `lo` is added only when `seen(line)` says the prefilter did
        not already make it a candidate where it lies, and only once (`sent` holds the starts given out).
        `reach` (per plan: how far the buffer was already searched, for successive calls over one buffer) keeps
        each byte searched once however many triggers' windows overlap: a log of triggers costs one pass."""
        floor = lo if floor is None else floor
        reach = {} if reach is None else reach
        extra: set[tuple[int, int]] = set()
        for start, end in spans:
            line = buf[start : min(end, start + MAX_LINE)]
            for k, (triggers, anchors, within, event) in enumerate(self.plans):
                if any(t in line for t in triggers) and event.matches(_text(line)):
                    # what lies before an earlier trigger's own line was searched for it (windows only move on)
                    done = max(floor, reach.get(k, floor))
                    if start > done:
                        extra.update(self._leading(buf, start, done, anchors, within))
                    reach[k] = max(start, reach.get(k, floor))
        if not extra:
            return list(spans)
        if floor < lo:
            before = {s for s in extra if s[0] < lo}
            extra -= before
            for span in before:
                if (sent is None or span[0] not in sent) and not (seen and seen(bytes(buf[span[0] : span[1]]))):
                    extra.add(span)
                    if sent is not None:
                        if len(sent) >= 1 << 16:
                            sent.clear()
                        sent.add(span[0])
        return sorted(extra.union(spans))

    def _leading(self, buf: Any, start: int, floor: int, anchors: tuple[bytes, ...], within: int) -> list[tuple[int, int]]:
        """Lines of buf[floor:start], at most `within` lines before `start`, that hold one of `anchors`."""
        first = _lines_back(buf, start, floor, within)
        self.touched = first if self.touched is None else min(self.touched, first)
        positions: list[int] = []
        for anchor in anchors:
            at = buf.find(anchor, first, start)
            while at >= 0:
                positions.append(at)
                at = buf.find(anchor, at + 1, start)
        return line_spans(buf, sorted(positions), lo=first, hi=start) if positions else []


def _text(line: Any) -> str:
    """A raw line as the collector matches it (decoded, prefixes stripped)."""
    return strip_prefixes(bytes(line).decode("utf-8", "replace")).text


BLOCK = 64 << 10


def _lines_back(buf: Any, start: int, floor: int, within: int) -> int:
    """Where the line `within` lines before the line starting at `start` begins (or `floor`): the line breaks are
    counted a block at a time, so the cost follows the bytes, not the number of lines."""
    need = within + 1  # the break that ends the line before `start` is the first
    pos = start
    while pos > floor:
        a = max(floor, pos - BLOCK)
        with memoryview(buf) as view:
            block = view[a:pos].tobytes()
        found = block.count(b"\n")
        if found < need:
            need -= found
            pos = a
            continue
        at = len(block)
        for _ in range(need):
            at = block.rfind(b"\n", 0, at)
        return a + at + 1
    return floor
