"""`scan`: read a whole (multi-rank) log and report the failure that started it all, and its fallout.

Speed comes from a prefilter: one multi-literal RE2 search over large raw chunks finds the few lines that
contain an anchor of some signature (or a traceback or exception marker); only those lines are normalised
and matched. Memory stays bounded by the chunk size, whatever the log's size or line lengths.
"""

from __future__ import annotations

import io
import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple, Union, cast

from . import passes
from .bundle import KbIndex, default_index
from .causality import EXIT_SIGNALS, choose_initiating, hints_for, untimed_across_files
from .limits import MAX_FINDINGS, MAX_HOSTS, MAX_NAMED, MAX_OPEN, MAX_RANKS, MAX_VERSIONS, MEMO_LINES
from .masks import mask_line
from .matcher import classify_line, score_for
from .normalize import (
    EXCEPTION_NAMES,
    EXCEPTION_SUFFIXES,
    KERNEL_PREFIXES,
    MAX_LINE,
    TRACEBACK,
    Line,
    exception_type,
    strip_prefixes,
)
from .prefilter import Prefilter, make_prefilter
from .reading import count_newlines, decoded, open_path, refuse_endless_stdin
from .report import Finding, ScanError, ScanReport
from .verdict import parse_stamp
from .versions import MARKERS as VERSION_MARKERS
from .versions import read_line as read_version

__all__ = [
    "EXIT_SIGNALS", "Finding", "ScanError", "ScanReport", "Source", "count_newlines", "prefilter_for",
    "rank_from_path", "scan", "scan_many",
]

TRACEBACK_REACH = 400  # lines after a traceback header in which its exception line is expected
GENERIC_MARKERS = (TRACEBACK, *EXCEPTION_SUFFIXES, *EXCEPTION_NAMES)
UNKNOWN_SCORE = 40
FINGERPRINT_SCORE = 80  # an ordered sequence of events, when no single line named the entry
FINGERPRINT_BONUS = 10
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


class _Facts(NamedTuple):
    found: tuple[Any, dict[str, Any]] | None  # the signature the text is reported under, and its values
    exception: str | None
    # fingerprints with an anchor in the text, each with whether the text matches each of its events
    fingerprints: tuple[tuple[int, tuple[bool, ...]], ...]
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
        self._memo: dict[str, _Facts] = {}
        self._masked: dict[str, str] = {}  # text -> mask_line(text), for the same reason
        self._stripped: dict[str, Line] = {}  # raw line -> strip_prefixes(raw): whole lines repeat, prefix and all

    def _facts(self, text: str) -> _Facts:
        """What a normalised line's text alone decides, remembered: logs repeat lines (every rank, every step)."""
        facts = self._memo.get(text)
        if facts is None:
            facts = _Facts(classify_line(self.index, text), exception_type(text), self.index.fingerprint_events(text),
                           any(marker in text for marker in VERSION_MARKERS))
            if len(self._memo) >= MEMO_LINES:
                self._memo.clear()
            self._memo[text] = facts
        return facts

    def begin_file(self, file_no: int, name: str | None, path_rank: int | None, *, error_file: bool = False) -> None:
        """The lines that follow come from this file (its place among the job's files, its name, the rank its
        path names); `error_file`: it is a TorchElastic error file, the rank's own account of its failure."""
        self.file_no, self.file_name, self.path_rank, self.error_file = file_no, name, path_rank, error_file

    def _strip(self, raw: str) -> Line:
        """strip_prefixes(raw), remembered for short lines; a copy, since feed sets the rank a path names."""
        known = self._stripped.get(raw)
        if known is None:
            known = strip_prefixes(raw)
            if len(raw) <= passes.MEMO_RAW_BYTES:
                if len(self._stripped) >= passes.MEMO_RAW_LINES:
                    self._stripped.clear()
                self._stripped[raw] = known
        return known.copy()

    def feed(self, raw: str, number: int) -> None:
        line = self._strip(raw)
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

    def _fingerprints(self, text: str, rank: int | None, number: int, exc: str | None,
                      touched: tuple[tuple[int, tuple[bool, ...]], ...]) -> None:
        for k, hits in touched:
            fp = self.index.fingerprints[k]
            key = (self.file_no, k, rank)
            step, first = self.progress.get(key, (0, number))
            if step and number - first > fp.within:
                step, first = 0, number  # too far apart: start over
            if not hits[step]:
                if step == 0 or not hits[0]:
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
            id=entry_id, line_number=number, rank=rank, role=role, text=text, score=score, exception=exc, title=title,
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
            found = fz.answer_raw(f.text)
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



def _sniff_file(path: Path, collector: _Collector) -> None:
    if collector.start is not None or not path.is_file():  # a pipe would lose what the sniff reads
        return
    try:
        with open_path(path) as fh:
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
                name, fh, owned = "<stdin>", decoded(src, "<stdin>", owned=False), False
            else:
                try:
                    name, fh, owned = str(src), open_path(Path(src)), True
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
                if owned and passes.is_big_plain_file(fh):
                    result = passes.scan_parallel(Path(src), os.fstat(fh.fileno()).st_size, collector, prefilter, progress)  # type: ignore[arg-type]
                count, err = result or passes.scan_stream(fh, collector, prefilter, progress)
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
                        collector.feed(segment, number)
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
            collector.feed(raw, number)
    if unopened and not names:  # nothing at all was read: no report would be true
        raise ScanError("; ".join(str(e) for e in unopened))
    report = collector.report(total, names)
    report.errors = [str(e) for e in errors] + report.errors
    return report
