"""Fleet-scale triage: scan a batch of jobs and get one plain row per job, as an Arrow record batch.

    from denpex_kb import fleet
    batch = fleet.scan_batch(["job-1.log.gz", ["job-2/rank0.log", "job-2/rank1.log"], raw_bytes])
    assert batch.schema == fleet.SCHEMA

A job is a path, the bytes of a log (plain, gzip, bzip2 or xz, told by the first bytes), or a list of those (the
per-rank files of one job). Every row follows `SCHEMA`, a published, versioned record schema of plain columns
(strings, integers, lists of strings): a warehouse, Spark or pandas reads it without denpex-kb installed.
A job that cannot be read gives a row whose `errors` say why; it never stops the batch.

The knowledge base is loaded once per process (`shared_index()`), so a long-lived worker (a Spark executor's Python
worker, a process pool) pays for it once. `scan_arrow` is the function to hand to Spark's `mapInArrow`;
`scan_dataframe` wires it up. pyarrow is an optional extra: `pip install 'denpex-kb[fleet]'`.
"""

from __future__ import annotations

import bz2
import io
import lzma
import os
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Union

try:
    import pyarrow as pa
except ImportError as _exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        "denpex_kb.fleet needs pyarrow, which is the optional extra 'fleet': pip install 'denpex-kb[fleet]' "
        "(or pip install pyarrow)"
    ) from _exc

from .bundle import KbIndex, default_index
from .output import RECORD_SCHEMA_VERSION, empty_record, job_record
from .reading import codec  # compression told by the first bytes, as scan does
from .scanner import ScanError, scan_many

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = [
    "SCHEMA",
    "SCHEMA_VERSION",
    "record",
    "scan_arrow",
    "scan_batch",
    "scan_dataframe",
    "scan_table",
    "shared_index",
    "spark_ddl",
]

# Bump on any change a reader could notice: a column added, removed, renamed or retyped, or a meaning changed.
# The record itself is made in one place, `output.job_record`, which `scan --jsonl` writes too.
SCHEMA_VERSION = RECORD_SCHEMA_VERSION

_LIST = pa.list_(pa.string())
SCHEMA = pa.schema(
    [
        pa.field("schema_version", pa.int32(), nullable=False),  # SCHEMA_VERSION of the code that wrote the row
        pa.field("job", pa.string(), nullable=False),  # the job's name: given, or its path
        pa.field("files", _LIST, nullable=False),  # the job's files (paths sorted, then "<bytes N>" labels)
        pa.field("initiating_id", pa.string()),  # the entry that started it all; null: healthy, or unknown exception
        pa.field("initiating_title", pa.string()),  # the entry's title, or the exception type no entry knows
        pa.field("initiating_rank", pa.int32()),
        pa.field("initiating_host", pa.string()),  # the first host name the line's prefix gave
        pa.field("initiating_line_number", pa.int64()),  # 1-based, in the file the line was read from
        pa.field("initiating_text", pa.string()),  # the normalised line
        pa.field("initiating_tier", pa.string()),  # exact | fingerprint | fuzzy | evidence; null: none named it
        pa.field("fix", pa.string()),
        pa.field("url", pa.string()),  # the entry's page on the hub
        pa.field("verdict_retry", pa.string()),  # yes | elsewhere | no | depends | unknown; null: no failure
        pa.field("verdict_blame", pa.string()),
        pa.field("verdict_exclude", _LIST, nullable=False),  # host names to keep the rerun off
        pa.field("collateral_ids", _LIST, nullable=False),  # distinct, in order; "?KeyError": an unknown exception
        pa.field("collateral_count", pa.int32(), nullable=False),  # collateral findings (each folds many lines)
        pa.field("versions", _LIST, nullable=False),  # "package==version" the logs print (NCCL, DeepSpeed, torch...)
        pa.field("errors", _LIST, nullable=False),  # what could not be read; the other columns cover the rest
    ],
    metadata={"denpex_kb.schema_version": str(SCHEMA_VERSION), "denpex_kb.schema": "fleet-job"},
)

Job = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview, "list[Any]", "tuple[Any, ...]"]

# ---------------------------------------------------------------------------------------------------------------
# The knowledge base, once per process


_INDEX: KbIndex | None = None
_BY_DIGEST: dict[str, KbIndex] = {}
_LOCK = threading.Lock()
LOADS = 0  # how many times this process loaded the default index (a Spark test reads it per worker)


def shared_index(custom: KbIndex | None = None) -> KbIndex:
    """The index this process scans with: loaded on first use, then kept for the process's life.

    `custom` (e.g. an index shipped to a Spark executor inside a pickled closure, where every task unpickles its
    own copy) is folded onto the first copy with the same digest, so its compiled patterns and prefilter are
    built once per process too."""
    global _INDEX, LOADS
    with _LOCK:
        if custom is not None:
            return _BY_DIGEST.setdefault(custom.digest, custom)
        if _INDEX is None:
            _INDEX = default_index()
            LOADS += 1
            _BY_DIGEST.setdefault(_INDEX.digest, _INDEX)
        return _INDEX


# ---------------------------------------------------------------------------------------------------------------
# Reading a job's members

_STEP = 1 << 20  # compressed bytes fed to a decompressor at a time


def _decompressor(kind: str) -> Any:
    if kind == "gzip":
        return zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    if kind == "bzip2":
        return bz2.BZ2Decompressor()
    return lzma.LZMADecompressor(format=lzma.FORMAT_XZ)


class _Inflate(io.RawIOBase):
    """Streams the decompressed bytes of an in-memory gzip, bzip2 or xz log (several members or streams, one
    after the other, as `cat a.gz b.gz` makes), so a big one is never held decompressed. A truncated or corrupt
    stream ends the text where the damage is; `error` says so."""

    def __init__(self, data: memoryview, kind: str) -> None:
        self.data = data
        self.kind = kind
        self.pos = 0
        self.dec = _decompressor(kind)
        self.pending = b""
        self.error: str | None = None
        self.done = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        want = len(buffer)
        while not self.pending and not self.done:
            self._more(max(want, _STEP))
        out, self.pending = self.pending[:want], self.pending[want:]
        buffer[: len(out)] = out
        return len(out)

    def _more(self, want: int) -> None:
        dec = self.dec
        try:
            if dec.eof:
                self._next_member()
            elif self.kind == "gzip" and dec.unconsumed_tail:
                self.pending = dec.decompress(dec.unconsumed_tail, want)
            elif self.kind != "gzip" and not dec.needs_input:
                self.pending = dec.decompress(b"", want)
            else:
                piece = self.data[self.pos : self.pos + _STEP]
                if not piece:
                    self.error = f"the {self.kind} stream is truncated; findings cover what was read"
                    self.done = True
                    return
                self.pos += len(piece)
                self.pending = dec.decompress(piece, want)
        except (zlib.error, OSError, EOFError, ValueError, lzma.LZMAError) as exc:
            self.error = f"the {self.kind} stream is corrupt ({exc}); findings cover what was read"
            self.done = True

    def _next_member(self) -> None:
        # Where this member ended; what follows is another member, zero padding, or something else.
        self.pos -= len(self.dec.unused_data)
        head = bytes(self.data[self.pos : self.pos + 8])
        if codec(head) == self.kind:
            self.dec = _decompressor(self.kind)
            return
        self.done = True
        rest = len(self.data) - self.pos
        if rest and bytes(self.data[self.pos :]).strip(b"\x00"):
            self.error = f"the {self.kind} stream is followed by {rest} bytes that are not {self.kind}; not read"


def _bytes_source(data: Any, label: str) -> tuple[Any, Callable[[], str | None] | None, str | None]:
    """(what scan_many reads, a function giving the decompression error afterwards, or an error right away)."""
    view = memoryview(data).cast("B")
    kind = codec(bytes(view[:8]))
    if kind is None:
        return io.BytesIO(view.tobytes() if not isinstance(data, bytes) else data), None, None
    if kind in ("gzip", "bzip2", "xz"):
        stream = _Inflate(view, kind)
        return io.BufferedReader(stream, 1 << 20), lambda: f"{label}: {stream.error}" if stream.error else None, None
    if kind == "zstd":
        return None, None, (f"{label}: zstd-compressed bytes, which the standard library cannot read; decompress them "
                            "first (zstd -d), or pass the file's path (read when the zstandard package is installed)")
    what = "an lz4-compressed stream" if kind == "lz4" else f"a {kind} archive"
    return None, None, f"{label}: {what}, not a log; extract the log first"


def _check_path(path: str) -> str | None:
    """Why this file cannot be scanned, found cheaply before the scan (None: go ahead)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
    except FileNotFoundError:
        return f"{path}: no such file"
    except IsADirectoryError:
        return f"{path}: is a directory; give the log files inside it"
    except PermissionError:
        return f"{path}: permission denied"
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    kind = codec(head)
    if kind in ("lz4", "zip", "7z"):
        what = "an lz4-compressed stream" if kind == "lz4" else f"a {kind} archive"
        return f"{path}: {what}, not a log; extract the log first"
    if kind == "zstd":
        try:
            import zstandard  # noqa: F401 - the scanner reads zstd with it
        except ImportError:
            return (f"{path}: zstd-compressed, and no zstd decoder is installed; decompress it first "
                    "or pip install zstandard")
    return None


# ---------------------------------------------------------------------------------------------------------------
# One job, one row


def _members(job: Any) -> list[Any] | None:
    if isinstance(job, (str, os.PathLike, bytes, bytearray, memoryview)):
        return [job]
    if isinstance(job, (list, tuple)):
        return list(job)
    return None


def _default_name(job: Any, members: list[Any] | None, position: int) -> str:
    if members and all(isinstance(m, (str, os.PathLike)) for m in members):
        paths: list[str] = [os.fspath(m) for m in members]
        if len(paths) == 1:
            return paths[0]
        try:
            common = os.path.commonpath(paths)
        except ValueError:  # absolute and relative paths mixed
            common = ""
        if common and common != os.sep:
            return common
    return f"#{position}"


_empty_row = empty_record
record = job_record


def _scan_job(job: Any, name: str | None, position: int, kb: KbIndex) -> dict[str, Any]:
    members = _members(job)
    name = name if name is not None else _default_name(job, members, position)
    if members is None:
        return _empty_row(name, [], [f"a job is a path, bytes, or a list of those, not {type(job).__name__}"])
    if not members:
        return _empty_row(name, [], ["an empty job: no files"])
    paths = sorted(os.fspath(m) for m in members if isinstance(m, (str, os.PathLike)))
    blobs = [m for m in members if not isinstance(m, (str, os.PathLike))]
    # Rows list files as scan_many reads them: paths in sorted order, then the bytes in the order given.
    files = [*paths, *(f"<bytes {k}>" for k in range(len(blobs)))]
    errors: list[str] = []
    sources: list[Any] = []
    late: list[Callable[[], str | None]] = []
    for path in paths:
        problem = _check_path(path)
        if problem:
            errors.append(problem)
        else:
            sources.append(path)
    for k, blob in enumerate(blobs):
        label = f"<bytes {k}>"
        if not isinstance(blob, (bytes, bytearray, memoryview)):
            errors.append(f"{label}: a job's member is a path or bytes, not {type(blob).__name__}")
            continue
        source, after, problem = _bytes_source(blob, label)
        if problem:
            errors.append(problem)
            continue
        sources.append(source)
        if after:
            late.append(after)
    if not sources:
        return _empty_row(name, files, errors)
    try:
        report = scan_many(sources, index=kb)
    except ScanError as exc:
        return _empty_row(name, files, [*errors, str(exc)])
    except Exception as exc:  # noqa: BLE001 - one bad job must not lose the batch's other rows
        return _empty_row(name, files, [*errors, f"internal error while scanning: {type(exc).__name__}: {exc}"])
    errors += [e for e in (f() for f in late) if e]
    return record(report, name, files, errors)


def _rows_to_batch(rows: list[dict[str, Any]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([r[f.name] for r in rows], type=f.type) for f in SCHEMA], schema=SCHEMA)


def scan_batch(jobs: Iterable[Job] | Mapping[str, Job], *, names: Iterable[str | None] | None = None,
               index: KbIndex | None = None) -> pa.RecordBatch:
    """Scan every job and return one row per job, in order, following SCHEMA.

    jobs: paths, bytes, or lists of those (one list = the per-rank files of one job); or a mapping from job
    name to job. names: one name per job (default: the path, the directory common to a group's paths, or
    "#<position>"). index: scan with this knowledge base instead of the shipped one."""
    if isinstance(jobs, Mapping):
        names, jobs = list(jobs.keys()), list(jobs.values())
    else:
        jobs = list(jobs)
    given = list(names) if names is not None else [None] * len(jobs)
    if len(given) != len(jobs):
        raise ValueError(f"{len(given)} names for {len(jobs)} jobs")
    kb = shared_index(index)
    return _rows_to_batch([_scan_job(job, name, k, kb) for k, (job, name) in enumerate(zip(jobs, given, strict=True))])


# ---------------------------------------------------------------------------------------------------------------
# Spark


def scan_arrow(batches: Iterable[pa.RecordBatch], *, paths_column: str = "paths", job_column: str = "job",
               rows_per_batch: int = 64, index: KbIndex | None = None) -> Iterator[pa.RecordBatch]:
    """For `DataFrame.mapInArrow`: input batches with a column of paths (a string, or a list of strings for the
    per-rank files of one job) and optionally a job-name column; yields SCHEMA batches, a few jobs at a time so
    results stream out as they are made."""
    for batch in batches:
        names = batch.column(job_column).to_pylist() if job_column in batch.schema.names else [None] * batch.num_rows
        jobs = batch.column(paths_column).to_pylist()
        for start in range(0, len(jobs), rows_per_batch):
            end = start + rows_per_batch
            yield scan_batch(jobs[start:end], names=names[start:end], index=index)


def scan_table(table: pa.Table, *, paths_column: str = "paths", job_column: str = "job",
               index: KbIndex | None = None) -> pa.Table:
    """A table of jobs (a paths column, optionally a job column) as a SCHEMA table: for Ray Data
    (`ds.map_batches(fleet.scan_table, batch_format="pyarrow")`), DuckDB and Polars (`.to_arrow()`)."""
    batches = scan_arrow(table.to_batches(), paths_column=paths_column, job_column=job_column, index=index)
    return pa.Table.from_batches(list(batches), schema=SCHEMA)


_SPARK_TYPES = {pa.int32(): "INT", pa.int64(): "BIGINT", pa.string(): "STRING", _LIST: "ARRAY<STRING>"}


def spark_ddl() -> str:
    """SCHEMA as a Spark DDL string, the output schema to give `mapInArrow`."""
    return ", ".join(f"{f.name} {_SPARK_TYPES[f.type]}" for f in SCHEMA)


def scan_dataframe(df: DataFrame, *, paths_column: str = "paths", job_column: str = "job",
                   index: KbIndex | None = None) -> DataFrame:
    """A Spark DataFrame of SCHEMA rows, one per row of `df` (which holds paths, not the logs' bytes: see the
    README's "Fleet triage" section)."""
    from functools import partial

    columns = [c for c in (job_column, paths_column) if c in df.columns]
    fn = partial(scan_arrow, paths_column=paths_column, job_column=job_column, index=index)
    return df.select(*columns).mapInArrow(fn, spark_ddl())
