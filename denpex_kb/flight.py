"""Hang analysis from PyTorch flight-recorder dumps: which rank never entered which collective.

PyTorch's flight recorder keeps a ring buffer of each rank's recent collectives (``TORCH_FR_BUFFER_SIZE``,
formerly ``TORCH_NCCL_TRACE_BUFFER_SIZE``). ProcessGroupNCCL writes it on a timeout
(``TORCH_NCCL_DUMP_ON_TIMEOUT``) to ``<prefix><global rank>`` (``TORCH_FR_DUMP_TEMP_FILE``, formerly
``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``, default ``/tmp/nccl_trace_rank_``); a gloo job gets the same bytes from
``torch._C._distributed_c10d._dump_fr_trace()`` (or ``_dump_fr_trace_json()``).

Formats read here (checked against the writers' headers shipped in the released wheels):

- 2.2: a bare pickled list of entries (``pg_id``, ``seq_id``, ``profiling_name``, ``input_sizes``,
  ``output_sizes``, ``time_created_us``, ``state``, ``retired``, ``frames``); no version, no group names.
- version "2.1" (torch 2.4): a dict with ``version``, ``pg_config``, ``entries`` (and ``nccl_comm_state``);
  entries have ``record_id``, ``pg_id``, ``process_group`` (name, desc), ``collective_seq_id``,
  ``p2p_seq_id``, ``op_id``, ``is_p2p``, sizes and dtypes, ``time_created_ns``, ``state``, ``frames``...
- version "2.4" (torch 2.7.1) adds ``pg_status`` and ``timeout_ms``; version "2.10" (torch 2.9.1, 2.13.0) adds
  ``comm_lib_version``, ``thread_id`` and ``thread_name``. The JSON form (``dump_json``) has the same keys, no
  frames, and ``0`` for an unknown discovery time.

A dump is untrusted input: it is unpickled by `SafeUnpickler`, which refuses every global (no class, no
function is ever looked up), so only plain containers and scalars can come out of it. No torch import.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import os
import pickle
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain, compress, islice
from operator import attrgetter, itemgetter, le, lt, ne
from pathlib import Path
from typing import Any, TypeVar

__all__ = [
    "Analysis",
    "Dump",
    "DumpError",
    "Entry",
    "Hang",
    "Mismatch",
    "SafeUnpickler",
    "analyze",
    "analyze_paths",
    "fold_into_report",
    "format_text",
    "read_dump",
    "read_dumps",
    "safe_loads",
]

MAX_DUMP_BYTES = 1 << 30  # a ring buffer of 20,000 entries with frames is tens of MB; refuse anything absurd

# Ops whose input and output sizes must agree on every member (others, e.g. gather, scatter, all_to_all with
# uneven splits, legitimately differ by rank: only their op and dtypes are compared).
SAME_SIZE_OPS = {
    "all_reduce", "allreduce", "broadcast", "_broadcast_oop", "reduce", "_reduce_oop", "all_gather",
    "_allgather_base", "_all_gather_base", "all_gather_into_tensor", "allgather_into_tensor_coalesced",
    "reduce_scatter", "_reduce_scatter_base", "reduce_scatter_tensor", "reduce_scatter_tensor_coalesced",
    "allreduce_coalesced", "barrier",
}
P2P_OPS = ("send", "recv", "recv_anysource")


class DumpError(Exception):
    """A dump that cannot be read (not a flight-recorder dump, truncated, or a pickle that asks for code)."""


_READ_AHEAD = 1 << 20


class SafeUnpickler(pickle.Unpickler):
    """Builds only what pickle's own opcodes make (dict, list, tuple, set, str, bytes, int, float, bool, None).

    Every global (a class, a function, `os.system`...) is refused, so no `__reduce__` can run anything.
    """

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused: the pickle asks for {module}.{name}; a flight-recorder dump holds only plain data")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("refused: the pickle asks for a persistent object")


def safe_loads(data: bytes) -> Any:
    try:
        # Through a buffered reader: the C unpickler then reads ahead with peek(); over a bare BytesIO it makes a
        # Python read() call per opcode, which made unpickling four times slower than pickle.loads.
        return SafeUnpickler(io.BufferedReader(io.BytesIO(data), _READ_AHEAD)).load()
    except pickle.UnpicklingError as exc:
        raise DumpError(str(exc)) from None
    except (EOFError, ValueError, TypeError, IndexError, KeyError, AttributeError, OverflowError, MemoryError,
            RecursionError, UnicodeDecodeError) as exc:
        raise DumpError(f"not a readable pickle ({type(exc).__name__}: {exc})") from None


@dataclass(slots=True)
class Entry:
    """One recorded collective or point-to-point op, normalised across dump versions."""

    rank: int
    record_id: int
    group: str  # the process group's name ("0" for the default group); pg_id in 2.2 dumps
    desc: str  # "default_pg", a user's group_desc, or "undefined"
    pg_id: int | None
    op: str  # the profiling name without its backend prefix: "all_reduce", "send 0->1"
    backend: str | None  # "nccl", "gloo", ...
    collective_seq_id: int
    p2p_seq_id: int
    is_p2p: bool
    op_id: int | None = None
    input_sizes: list[Any] = field(default_factory=list)
    output_sizes: list[Any] = field(default_factory=list)
    input_dtypes: list[Any] | None = None
    output_dtypes: list[Any] | None = None
    state: str | None = None
    time_created_ns: int | None = None
    frames: list[dict[str, Any]] = field(default_factory=list)
    retired: bool | None = None
    timeout_ms: int | None = None

    @property
    def kind(self) -> str:
        return self.op.split(" ", 1)[0]

    @property
    def seq(self) -> int:
        return self.p2p_seq_id if self.is_p2p else self.collective_seq_id

    def where(self) -> str | None:
        """The innermost frame outside torch (the user's call site), as `file.py:line`."""
        for fr in self.frames:
            if not isinstance(fr, dict):
                continue
            name = str(fr.get("filename", ""))
            norm = name.replace("\\", "/")
            if not name or "/torch/" in norm or norm.startswith("torch/") or name.startswith("<"):
                continue
            return f"{os.path.basename(name)}:{fr.get('line')}"
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank, "group": self.group, "desc": self.desc, "op": self.op,
            "seq_id": self.seq, "collective_seq_id": self.collective_seq_id, "p2p_seq_id": self.p2p_seq_id,
            "is_p2p": self.is_p2p, "record_id": self.record_id, "state": self.state,
            "time_created_ns": self.time_created_ns, "input_sizes": self.input_sizes,
            "output_sizes": self.output_sizes, "input_dtypes": self.input_dtypes,
            "output_dtypes": self.output_dtypes, "where": self.where(),
            "frames": [f for f in self.frames if isinstance(f, dict)],
        }


# (op, input_sizes, output_sizes, input_dtypes, output_dtypes): what members must agree on at one sequence number
Call = tuple[str, list[Any], list[Any], "list[Any] | None", "list[Any] | None"]


@dataclass(slots=True)
class Ops:
    """One process group's ops on one rank, in record order, as columns of the join keys.

    The join reads only these; building an `Entry` per op (two million for 1,024 ranks) took as long as the
    unpickling, so an entry is made only where a report shows it (`Dump.entry`).
    """

    desc: str  # the first desc other than "undefined", as the group's entries say it
    record_id: list[int]
    seq: list[int]  # `Entry.seq`: p2p_seq_id for a point-to-point op, collective_seq_id otherwise
    is_p2p: list[bool]
    call: list[str]  # ops with different calls have different keys (`_call_key`)
    pos: list[int]  # where the op is in the dump's entries
    pg_ids: set[int]  # the group's pg_id values (pg_status is keyed by them), added in record order


@dataclass
class Dump:
    path: str
    rank: int
    version: str | None  # None: a 2.2 dump (bare list, no version key)
    form: str  # "pickle" or "json"
    groups: dict[str, Ops]  # by process-group name, in the order the entries first name them
    last: list[int]  # positions of the last entries by record id: where a rank that stopped was
    size: int  # how many entries
    backend: str | None  # the first entry's backend that names one ("nccl", "gloo")
    wrapped: bool  # the ring buffer has overwritten older entries (record ids count from 0 on every rank)
    pg_config: dict[str, Any] = field(default_factory=dict)
    pg_status: dict[str, Any] = field(default_factory=dict)
    comm_lib_version: str | None = None
    raw: list[Any] = field(default_factory=list, repr=False)  # the entries as unpickled (plain containers)
    built: list[Entry] | None = field(default=None, repr=False)  # all entries in full, once asked for

    def entry(self, pos: int) -> Entry:
        """The entry at a position of the dump, in full (made from the unpickled entry each time)."""
        return self.built[pos] if self.built is not None else _entry(self.raw[pos], self.rank, pos)

    @property
    def entries(self) -> list[Entry]:
        """Every entry in full, in the dump's order (made the first time it is asked for)."""
        if self.built is None:
            self.built = [_entry(raw, self.rank, i) for i, raw in enumerate(self.raw)]
        return self.built

    @property
    def tail(self) -> list[Entry]:
        return [self.entry(i) for i in self.last]

    @cached_property
    def by_group(self) -> dict[str, list[Entry]]:
        """Each process group's entries in full, in record order."""
        out: dict[str, list[Entry]] = {}
        for e in sorted(self.entries, key=_RECORD_ID):
            out.setdefault(e.group, []).append(e)
        return {name: out.get(name, []) for name in self.groups}


_RECORD_ID = attrgetter("record_id")
T = TypeVar("T")


@contextlib.contextmanager
def paused_collector() -> Iterator[None]:
    """The cyclic garbage collector off for the block (and back on after it if it was on).

    Reading 1,024 ranks' dumps makes millions of small containers, none of them in a cycle: each collection
    would rescan them all and free nothing (a third of the time of `hang` on such dumps). Wrap a block whose
    dumps are released before it ends: once it is on again, the collector's first pass then finds them gone.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# --- reading -------------------------------------------------------------------------------------------------

_RANK_IN_NAME = re.compile(r"(\d+)$")
_SUFFIXES = (".pkl", ".pickle", ".json", ".bin", ".dump", ".fr")


def rank_from_name(path: str | os.PathLike[str]) -> int | None:
    """`<prefix><rank>`, whatever the prefix (`nccl_trace_rank_3`, `fr_3`, `trace3.json`)."""
    name = os.path.basename(os.fspath(path))
    for suffix in _SUFFIXES:
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
            break
    m = _RANK_IN_NAME.search(name)
    return int(m.group(1)) if m else None


def _int(value: Any, default: int | None = None) -> int | None:
    if type(value) is int:
        return value
    if value is None:
        return default
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value == value:
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return default


def _str_list(value: Any) -> list[Any] | None:
    if type(value) is list:
        return value  # a fresh list, as unpickled or parsed
    return list(value) if isinstance(value, tuple) else None


def _sizes(value: Any) -> list[Any]:
    if type(value) is list:
        return value  # as unpickled or parsed: a fresh list of lists of ints
    if not isinstance(value, tuple):
        return []
    return [list(v) if isinstance(v, (list, tuple)) else v for v in value]


def _entry(raw: Any, rank: int, index: int) -> Entry:
    # Run once per recorded op (two million for 1,024 ranks): well-typed values, the writers' own, take the first
    # branch of each test; anything else goes through the lenient converters.
    if type(raw) is not dict:
        raise DumpError(f"entry {index} is a {type(raw).__name__}, not a dict")
    get = raw.get
    name = get("profiling_name")
    if type(name) is not str:
        name = "?"
    backend: str | None
    backend, colon, op = name.partition(":")
    if not colon:
        backend, op = None, name
    pg = get("process_group")
    pg_id = get("pg_id")
    if type(pg_id) is not int:
        pg_id = _int(pg_id)
    if isinstance(pg, (list, tuple)) and len(pg) >= 1:
        group = pg[0] if type(pg[0]) is str else str(pg[0])
        desc = (pg[1] if type(pg[1]) is str else str(pg[1])) if len(pg) > 1 else "undefined"
    else:  # 2.2: only the process group's uid
        group = str(pg_id) if pg_id is not None else "?"
        desc = "undefined"
    if "collective_seq_id" in raw:
        coll = get("collective_seq_id")
        if type(coll) is not int:
            coll = _int(coll, 0) or 0
        p2p = get("p2p_seq_id", 0)
        if type(p2p) is not int:
            p2p = _int(p2p, 0) or 0
        is_p2p = get("is_p2p", False)
        if type(is_p2p) is not bool:
            is_p2p = bool(is_p2p)
    else:  # 2.2: one seq_id per group, collectives and p2p alike
        seq = _int(get("seq_id"), 0) or 0
        is_p2p = op.split(" ", 1)[0] in P2P_OPS
        coll, p2p = (0, seq) if is_p2p else (seq, 0)
    created = get("time_created_ns")
    if type(created) is not int:
        created = _int(created)
        if created is None and get("time_created_us") is not None:
            us = _int(get("time_created_us"))
            created = us * 1000 if us is not None else None
    record_id = get("record_id")
    if type(record_id) is not int:
        record_id = _int(record_id, index) or 0
    op_id = get("op_id")
    if type(op_id) is not int:
        op_id = _int(op_id)
    timeout = get("timeout_ms")
    if type(timeout) is not int:
        timeout = _int(timeout)
    state = get("state")
    retired = get("retired")
    frames = get("frames")
    return Entry(
        rank, record_id, group, desc, pg_id, op.strip(), backend, coll, p2p, is_p2p, op_id,
        _sizes(get("input_sizes")), _sizes(get("output_sizes")),
        _str_list(get("input_dtypes")), _str_list(get("output_dtypes")),
        state if type(state) is str else None, created,
        frames if type(frames) is list else [],  # items are checked where they are read
        retired if type(retired) is bool else None, timeout,
    )


def _decode(data: bytes) -> tuple[Any, str]:
    if data[:1] == b"\x80":
        return safe_loads(data), "pickle"
    if data.lstrip()[:1] in (b"{", b"["):
        try:
            return json.loads(data), "json"
        except (ValueError, RecursionError) as exc:
            raise DumpError(f"not valid JSON ({exc})") from None
    if not data:
        raise DumpError("empty file")
    raise DumpError("not a flight-recorder dump (neither a pickle nor JSON)")


def _unwrap(obj: Any) -> tuple[str | None, list[Any], dict[Any, Any]]:
    """(version, raw entries, top-level dict) of any dump version."""
    if isinstance(obj, list):  # 2.2
        return None, obj, {}
    if not isinstance(obj, dict):
        raise DumpError(f"not a flight-recorder dump (a {type(obj).__name__})")
    if "entries" not in obj and "version" not in obj:
        raise DumpError("not a flight-recorder dump (no 'version' or 'entries' key)")
    version = str(obj["version"]) if obj.get("version") is not None else None
    raw_entries = obj.get("entries") or []  # the JSON writer leaves the key out when there are no entries
    if not isinstance(raw_entries, list):
        raise DumpError("'entries' is not a list")
    return version, raw_entries, obj


def parse_dump(data: bytes, *, path: str = "<bytes>", rank: int | None = None) -> Dump:
    """A dump from its bytes: a pickle (any version) or the JSON form. `rank` defaults to the content's."""
    obj, form = _decode(data)
    version, raw_entries, top = _unwrap(obj)
    if rank is None:
        # No writer that was read records the global rank; accept it when a wrapper adds it.
        rank = _int(top.get("rank")) if "rank" in top else _int(top.get("global_rank"))
    if rank is None:
        raise DumpError("cannot tell the rank: name the file <prefix><rank>")
    index = _fast_index(raw_entries)
    built = None
    if index is None:  # an older version or odd values: every entry through the lenient reader
        built = [_entry(raw, rank, i) for i, raw in enumerate(raw_entries)]
        index = _index_entries(built)
    raw_config, raw_status = top.get("pg_config"), top.get("pg_status")
    pg_config: dict[Any, Any] = raw_config if isinstance(raw_config, dict) else {}
    pg_status: dict[Any, Any] = raw_status if isinstance(raw_status, dict) else {}
    clv = top.get("comm_lib_version")
    return Dump(path=path, rank=rank, version=version, form=form, **index,
                pg_config={str(k): v for k, v in pg_config.items()},
                pg_status={str(k): v for k, v in pg_status.items()},
                comm_lib_version=clv if isinstance(clv, str) else None, raw=raw_entries, built=built)


TAIL = 3  # a culprit's last entries shown


def _call_key(call: Call) -> str:
    """The repr of a call, interned so that the ranks' keys compare by identity.

    Keys are made once per run of equal calls (`_runs`), so an op keyed like an equal one before it may differ
    from it in type only (1024 and 1024.0): the join then sees the same call, as `_same_call` does, and the
    report shows the op's own values (`Dump.entry`). Different calls always get different keys.
    """
    return sys.intern(repr(call))


def _index_entries(entries: list[Entry]) -> dict[str, Any]:
    """`Dump`'s index fields from full entries (the lenient reader's); `_fast_index` must give the same."""
    order = sorted(range(len(entries)), key=lambda i: entries[i].record_id)
    keys = _runs([(e.op, e.input_sizes, e.output_sizes, e.input_dtypes, e.output_dtypes) for e in entries], _call_key)
    by_group: dict[str, list[int]] = {e.group: [] for e in entries}
    for i in order:
        by_group[entries[i].group].append(i)
    groups = {name: Ops(
        desc=next((entries[i].desc for i in ix if entries[i].desc != "undefined"), "undefined"),
        record_id=[entries[i].record_id for i in ix], seq=[entries[i].seq for i in ix],
        is_p2p=[entries[i].is_p2p for i in ix], call=[keys[i] for i in ix], pos=ix,
        pg_ids={pid for pid in (entries[i].pg_id for i in ix) if pid is not None},
    ) for name, ix in by_group.items()}
    return {"groups": groups, "last": order[-TAIL:], "size": len(entries),
            "backend": next((e.backend for e in entries if e.backend), None),
            "wrapped": bool(entries) and entries[order[0]].record_id > 0}


_FIELDS = itemgetter("record_id", "pg_id", "process_group", "collective_seq_id", "p2p_seq_id", "is_p2p",
                     "profiling_name", "input_sizes", "output_sizes", "input_dtypes", "output_dtypes")


def _only(values: Iterable[Any], *types: type) -> bool:
    return set(map(type, values)) <= set(types)


def _fast_index(raw: list[Any]) -> dict[str, Any] | None:
    """`_index_entries` of well-formed entries (the writers' own, version 2.1 and later) read column by column.

    Each pass over a whole column runs in C; None (the lenient path) for anything it does not cover: a missing
    key, a value of another type, a process group that is not a (name, desc) pair.
    """
    try:
        rows = list(map(_FIELDS, raw))  # a KeyError or TypeError for an entry that lacks a key or is no dict
    except (KeyError, TypeError, IndexError):
        return None
    if not rows:
        return None
    rid, pgid, pg, coll, p2p, isp, name, isz, osz, idt, odt = map(list, zip(*rows, strict=True))
    del rows
    if not (_only(chain(rid, pgid, coll, p2p), int) and _only(isp, bool) and _only(name, str)
            and _only(chain(isz, osz, idt, odt), list)):  # the types the lenient reader keeps as they are
        return None
    if _only(pg, list):  # the JSON form
        pg = list(map(tuple, pg))
    if not _only(pg, tuple) or not all(len(t) == 2 and _only(t, str) for t in dict.fromkeys(pg)):
        return None
    ops, backends = _ops_of(name)
    n = len(raw)
    order = range(n) if all(map(le, rid, islice(rid, 1, None))) else sorted(range(n), key=rid.__getitem__)
    seq = coll if not any(isp) else [p if b else c for c, p, b in zip(coll, p2p, isp, strict=True)]
    keys = _runs(list(zip(ops, isz, osz, idt, odt, strict=True)), _call_key)
    groups = {gname: _ops_columns((rid, seq, isp, keys), pgid, pg, ix) for gname, ix in _split(order, pg).items()}
    return {"groups": groups, "last": list(order[-TAIL:]), "size": n,
            "backend": next((b for b in map(backends.get, name) if b), None), "wrapped": rid[order[0]] > 0}


def _runs(values: list[Any], make: Callable[[Any], T]) -> list[T]:
    """`make` of each value, called once per run of equal neighbours (found in C): consecutive ops mostly
    repeat one call from one line of the training loop."""
    n = len(values)
    if not n:
        return []
    starts = [0, *compress(range(1, n), map(ne, values, islice(values, 1, None)))]
    out: list[T] = []
    for a, b in zip(starts, [*starts[1:], n], strict=True):
        out += [make(values[a])] * (b - a)
    return out


def _ops_of(names: list[str]) -> tuple[list[str], dict[str, str | None]]:
    """Each profiling name's op ("nccl:all_reduce" -> "all_reduce"), and each distinct name's backend."""
    op_of: dict[str, str] = {}
    backend_of: dict[str, str | None] = {}
    for n in dict.fromkeys(names):
        backend, colon, op = n.partition(":")
        op_of[n], backend_of[n] = (op.strip(), backend) if colon else (n.strip(), None)
    return list(map(op_of.__getitem__, names)), backend_of


def _split(order: Sequence[int], pg: list[tuple[str, str]]) -> dict[str, Sequence[int]]:
    """Each group's positions in record order; groups in the order the entries (as dumped) first name them."""
    names = {t: t[0] for t in dict.fromkeys(pg)}
    out: dict[str, list[int]] = {name: [] for name in names.values()}
    if len(out) == 1:
        return dict.fromkeys(out, order)
    group_of = list(map(names.__getitem__, pg))
    for i in order:
        out[group_of[i]].append(i)
    return dict(out)


def _ops_columns(columns: tuple[list[Any], ...], pgid: list[int], pg: list[tuple[str, str]], ix: Sequence[int]) -> Ops:
    if not (isinstance(ix, range) and len(ix) == len(pgid)):
        columns = tuple([col[i] for i in ix] for col in columns)
        pgid, pg = [pgid[i] for i in ix], [pg[i] for i in ix]
    rid, seq, isp, keys = columns
    desc = next((t[1] for t in dict.fromkeys(pg) if t[1] != "undefined"), "undefined")
    return Ops(desc, rid, seq, isp, keys, list(ix), set(pgid))


def read_dump(path: str | os.PathLike[str], rank: int | None = None) -> Dump:
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_DUMP_BYTES:
            raise DumpError(f"{size} bytes: too large for a flight-recorder dump")
        data = p.read_bytes()
    except OSError as exc:
        raise DumpError(exc.strerror or str(exc)) from None
    if rank is None:
        rank = rank_from_name(p)
    if rank is None:
        # the content may carry it (a wrapper's "rank" key); parse_dump says so when it does not
        return parse_dump(data, path=str(p), rank=None)
    return parse_dump(data, path=str(p), rank=rank)


def expand_paths(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Files as given; a directory stands for its regular files (not recursive, hidden files skipped)."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            out.extend(sorted(c for c in p.iterdir() if c.is_file() and not c.name.startswith(".")))
        else:
            out.append(p)
    return out


def read_dumps(paths: Iterable[str | os.PathLike[str]]) -> tuple[list[Dump], list[str]]:
    """Every readable dump, and one problem line per file that is not (a duplicate rank included)."""
    dumps: dict[int, Dump] = {}
    problems: list[str] = []
    with paused_collector():
        for p in expand_paths(paths):
            try:
                d = read_dump(p)
            except DumpError as exc:
                problems.append(f"{p}: {exc}")
                continue
            if d.rank in dumps:
                problems.append(f"{p}: a second dump for rank {d.rank} (first: {dumps[d.rank].path}); ignored")
                continue
            dumps[d.rank] = d
        return [dumps[r] for r in sorted(dumps)], problems


# --- analysis ------------------------------------------------------------------------------------------------


@dataclass
class Hang:
    group: str
    desc: str
    op: str | None
    seq_id: int
    p2p: bool
    missing_ranks: list[int]  # members that never entered it (absent dumps included when the others prove it)
    absent_dumps: list[int]  # members with no dump
    waiting_ranks: list[int]  # members that entered it and did not get past it
    since_ns: int | None  # the earliest time a waiting rank entered it
    where: dict[int, str | None] = field(default_factory=dict)  # waiting rank -> call site
    last_entries: dict[int, list[Entry]] = field(default_factory=dict)  # culprit -> its last entries
    note: str | None = None
    caveat: str | None = None  # what the conclusion assumes

    @property
    def label(self) -> str:
        return group_label(self.group, self.desc)

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.label, "group_name": self.group, "group_desc": self.desc, "op": self.op,
            "collective_seq_id": None if self.p2p else self.seq_id,
            "p2p_seq_id": self.seq_id if self.p2p else None,
            "missing_ranks": self.missing_ranks, "absent_dumps": self.absent_dumps,
            "waiting_ranks": self.waiting_ranks, "waiting_since_ns": self.since_ns,
            "waiting_since": _stamp(self.since_ns, full=True),
            "where": {str(k): v for k, v in self.where.items()},
            "last_entries": {str(r): [e.to_dict() for e in es] for r, es in self.last_entries.items()},
            "note": self.note, "caveat": self.caveat,
        }


@dataclass
class Mismatch:
    group: str
    desc: str
    seq_id: int
    p2p: bool
    what: str  # "op", "sizes", "dtypes"
    sides: list[dict[str, Any]]  # one per distinct signature: ranks, op, sizes, dtypes, where

    def to_dict(self) -> dict[str, Any]:
        return {"group": group_label(self.group, self.desc), "group_name": self.group,
                "collective_seq_id": None if self.p2p else self.seq_id, "p2p_seq_id": self.seq_id if self.p2p else None,
                "what": self.what, "sides": self.sides}


@dataclass
class Analysis:
    dumps: list[Dump]
    hangs: list[Hang] = field(default_factory=list)
    mismatches: list[Mismatch] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # unreadable files, rebuilt groups, ring wraps
    undecided: list[str] = field(default_factory=list)  # where the dumps cannot support a conclusion (ring wrap)

    @property
    def found(self) -> bool:
        return bool(self.hangs or self.mismatches)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dumps": [{"path": d.path, "rank": d.rank, "version": d.version, "form": d.form,
                       "backend": d.backend, "entries": d.size, "wrapped": d.wrapped} for d in self.dumps],
            "hangs": [h.to_dict() for h in self.hangs],
            "mismatches": [m.to_dict() for m in self.mismatches],
            "problems": self.problems,
            "undecided": self.undecided,
        }


def group_label(name: str, desc: str) -> str:
    if desc and desc != "undefined":
        return desc
    return "default_pg" if name == "0" else f"group {name}"


def _parse_ranks(value: Any) -> list[int] | None:
    """pg_config's `ranks` is a string "[0, 1, 2]" (ranks_str); a list is accepted too."""
    if isinstance(value, (list, tuple)):
        ranks = [_int(v) for v in value]
    elif isinstance(value, str):
        body = value.strip().strip("[]").strip()
        if not body:
            return None
        ranks = [_int(part) for part in body.split(",")]
    else:
        return None
    return sorted({r for r in ranks if r is not None}) or None


@dataclass
class _Group:
    name: str
    desc: str
    members: list[int]


def _groups(dumps: list[Dump], world_size: int | None, problems: list[str]) -> list[_Group]:
    seen: dict[str, str] = {}
    for d in dumps:
        for name, ops in d.groups.items():
            if seen.get(name, "undefined") == "undefined":
                seen[name] = ops.desc
    configured: dict[str, set[int]] = {}
    done: set[tuple[str, str]] = set()  # every rank's pg_config repeats the same strings: each is parsed once
    for d in dumps:
        for key, info in d.pg_config.items():
            if not isinstance(info, dict):
                continue
            name = str(info.get("name", key)) or key
            value = info.get("ranks")
            if isinstance(value, str):
                if (name, value) in done:
                    continue
                done.add((name, value))
            ranks = _parse_ranks(value)
            if ranks and name:
                configured.setdefault(name, set()).update(ranks)
    present = [d.rank for d in dumps]
    world = list(range(world_size)) if world_size else list(range(max(present) + 1)) if present else []
    out: list[_Group] = []
    broken = [d for d in dumps if d.pg_config and not any(str(i.get("name", "")) for i in d.pg_config.values() if isinstance(i, dict))]
    for name in sorted(seen, key=lambda n: (len(n), n)):
        desc = seen[name]
        if name in configured:
            members = sorted(configured[name])
            out.append(_Group(name, desc, members))
            continue
        if name == "0" or desc == "default_pg":
            members, how = world, (f"--world-size {world_size}" if world_size else f"ranks 0-{world[-1]} (the highest rank with a dump)" if world else "")
        else:
            members = sorted({d.rank for d in dumps if name in d.groups})
            how = "the ranks that recorded it; a member that never did is not seen"
        if all(d.version is None for d in dumps):
            why = "2.2 dumps have no pg_config"
        else:
            why = "pg_config has no usable entry for it" + (" (its key is '' with no ranks, as gloo writes it)" if broken else "")
        problems.append(f"members of {group_label(name, desc)} rebuilt from the entries ({why}): {how}")
        out.append(_Group(name, desc, members))
    return out


def _op(d: Dump, ops: Ops, i: int) -> Entry:
    return d.entry(ops.pos[i])


def _signature(e: Entry) -> tuple[Any, ...]:
    return (e.op, e.input_sizes, e.output_sizes, e.input_dtypes, e.output_dtypes)


def _same_call(a: Entry, b: Entry) -> bool:
    """`_signature(a) == _signature(b)` without building the tuples (run for every entry of every rank)."""
    return (a.op == b.op and a.input_sizes == b.input_sizes and a.output_sizes == b.output_sizes
            and a.input_dtypes == b.input_dtypes and a.output_dtypes == b.output_dtypes)


def _compare(group: _Group, seq: int, p2p: bool, at: dict[int, Entry]) -> Mismatch | None:
    if len(at) < 2:
        return None
    values = iter(at.values())
    first = next(values)
    if all(_same_call(e, first) for e in values):
        return None  # the common case, without building signatures
    ops = {e.op for e in at.values()}
    if p2p:
        kinds = {e.kind for e in at.values()}
        if kinds <= set(P2P_OPS) and len(kinds) == 2 and len(at) == 2:
            ops = {"p2p"}  # a send meeting its recv is the match, not a mismatch
    what = None
    if len(ops) > 1:
        what = "op"
    elif len({tuple(e.input_dtypes or ()) for e in at.values()} | {tuple(e.output_dtypes or ()) for e in at.values()}) > 1 and not p2p:
        what = "dtypes"
    elif p2p:
        if len({repr(e.input_sizes or e.output_sizes) for e in at.values()}) > 1:
            what = "sizes"
        dtypes = {tuple(e.input_dtypes or e.output_dtypes or ()) for e in at.values()}
        if len(dtypes) > 1:
            what = "dtypes"
    elif next(iter(at.values())).kind in SAME_SIZE_OPS and len({repr((e.input_sizes, e.output_sizes)) for e in at.values()}) > 1:
        what = "sizes"
    if what is None:
        return None
    sides: dict[Any, dict[str, Any]] = {}
    for r in sorted(at):
        e = at[r]
        key = repr(_signature(e))
        side = sides.setdefault(key, {"ranks": [], "op": e.op, "input_sizes": e.input_sizes,
                                      "output_sizes": e.output_sizes, "input_dtypes": e.input_dtypes,
                                      "output_dtypes": e.output_dtypes, "where": {}})
        side["ranks"].append(r)
        side["where"][str(r)] = e.where()
    return Mismatch(group.name, group.desc, seq, p2p, what, list(sides.values()))


def _completed(d: Dump, ops: Ops, seq: int) -> bool | None:
    """Did this rank finish `seq` of the group? None: the dump cannot tell.

    NCCL entries say it (`state` is "completed" once the watchdog saw the work end). Gloo's do not: they stay
    "scheduled", and pg_status counts a collective that timed out as completed (seen with torch 2.13), so a
    gloo dump never proves completion either way.
    """
    if d.backend == "gloo":
        return None
    last = _last_index(ops.seq, seq)  # the group's last op with that sequence number, collective or p2p
    state = d.entry(ops.pos[last]).state if last is not None else None
    if state == "completed":
        return True
    if state in ("scheduled", "started"):
        return False
    for pid in ops.pg_ids:
        st = d.pg_status.get(str(pid))
        if isinstance(st, dict):
            done = _int(st.get("last_completed_collective"))
            if done is not None and done >= 0:
                return done >= seq
    return None


def _last_entries(d: Dump | None) -> list[Entry]:
    return list(d.tail) if d is not None else []


def _last_index(values: list[int], value: int) -> int | None:
    try:
        return len(values) - 1 - values[::-1].index(value)
    except ValueError:
        return None


_NO_OPS = Ops("undefined", [], [], [], [], [], set())


def _collectives(ops: Ops) -> dict[int, int]:
    """Sequence number -> position of the rank's first collective with it (p2p ops and numbers <= 0 left out)."""
    seq = ops.seq
    if seq and seq[0] > 0 and not any(ops.is_p2p) and all(map(lt, seq, islice(seq, 1, None))):
        return dict(zip(seq, range(len(seq)), strict=True))  # the usual case, built in C: increasing, no p2p
    mine: dict[int, int] = {}
    for i, (s, p2p) in enumerate(zip(seq, ops.is_p2p, strict=True)):
        if not p2p and s > 0 and s not in mine:
            mine[s] = i
    return mine


def _first_mismatch(group: _Group, present: list[int], dumps: dict[int, Dump], allg: dict[int, Ops],
                    per: dict[int, dict[int, int]]) -> Mismatch | None:
    """Each op's call key compared with the first holder's (by rank) in one pass; only a sequence number where
    one differs is looked at closely. After the first mismatch the ranks are out of step: later ones are
    consequences."""
    reference: dict[int, str] = {}
    differ: set[int] = set()
    recent: list[int] = []
    for r in present:
        mine, call = per[r], allg[r].call
        # Most ranks recorded the very same ops as one just compared (two list comparisons in C): nothing new.
        if any(call == allg[q].call and (mine is per[q] or mine == per[q]) for q in recent):
            continue
        recent = [r, *recent[:3]]
        for s, i in mine.items():
            k = call[i]
            f = reference.setdefault(s, k)
            if f is not k and f != k:
                differ.add(s)
    for s in sorted(differ):
        m = _compare(group, s, False, {r: _op(dumps[r], allg[r], per[r][s]) for r in present if s in per[r]})
        if m:
            return m
    return None


def _join(group: _Group, dumps: dict[int, Dump], out: Analysis) -> None:
    """The group's collectives joined on collective_seq_id (point-to-point ops: `_join_p2p`)."""
    members = group.members
    per: dict[int, dict[int, int]] = {}
    allg: dict[int, Ops] = {}
    before, shared = _NO_OPS, {}
    for r in members:
        d = dumps.get(r)
        if d is None:
            continue
        allg[r] = ops = d.groups.get(group.name, _NO_OPS)
        # Ranks in step hold the same sequence numbers at the same positions: one map serves them all.
        if before is _NO_OPS or ops.seq != before.seq or ops.is_p2p != before.is_p2p:
            shared = _collectives(ops)
        per[r], before = shared, ops
    absent = [r for r in members if r not in dumps]
    present = [r for r in members if r in dumps]
    if not present or not any(per.get(r) for r in present):
        return
    label = group_label(group.name, group.desc)
    kind = "collective"

    # A member whose buffer wrapped and holds none of this group's entries cannot be placed.
    unknown = [r for r in present if not per.get(r) and dumps[r].wrapped]
    if unknown:
        out.problems.append(
            f"{label}: the ring buffer of rank(s) {_ranks(unknown)} wrapped and holds no {kind} of this group; "
            f"cannot tell where they are in it (raise TORCH_FR_BUFFER_SIZE)")
        present = [r for r in present if r not in unknown]
        if not present:
            return
    hi = {r: max(per[r]) if per.get(r) else 0 for r in present}
    lo = {r: min(per[r]) if per.get(r) else 0 for r in present}
    m = _first_mismatch(group, present, dumps, allg, per)
    if m:
        out.mismatches.append(m)

    low, high = min(hi.values()), max(hi.values())
    if low < high:
        seq = low + 1
        missing = sorted(r for r in present if hi[r] < seq)
        waiting = sorted(r for r in present if hi[r] >= seq)
        holders = {r: _op(dumps[r], allg[r], per[r][seq]) for r in waiting if seq in per[r]}
        if not holders:
            out.undecided.append(label)
            out.problems.append(
                f"{label}: the ranks' buffers no longer overlap (ring wrap): rank(s) {_ranks(missing)} stopped at "
                f"{kind} #{low}, rank(s) {_ranks(waiting)} hold only #{min(lo[r] for r in waiting)} and later; "
                f"which op #{seq} was is no longer recorded, so no culprit is named")
            return
        first = holders[min(holders)]
        # A waiting rank that already completed seq was not blocked by the missing ones: it is still a gap
        # but with async ops it may be a rank that is only slow; keep the conclusion, note the completion.
        done = [r for r in waiting if _completed(dumps[r], allg[r], seq)]
        since = min((e.time_created_ns for e in holders.values() if e.time_created_ns), default=None)
        h = Hang(group.name, group.desc, first.op, seq, False, missing + absent, absent, waiting, since,
                 where={r: e.where() for r, e in holders.items()},
                 last_entries={r: _last_entries(dumps.get(r)) for r in missing + absent})
        if done:
            h.note = f"rank(s) {_ranks(done)} report #{seq} completed: the gap may be a slow rank rather than a hang"
        if absent:
            h.note = ((h.note + "; ") if h.note else "") + f"no dump from rank(s) {_ranks(absent)}: where they are is unknown"
        out.hangs.append(h)
        return

    # every present member entered the same last op
    seq = low
    if seq <= 0:
        return
    holders = {r: _op(dumps[r], allg[r], per[r][seq]) for r in present if seq in per[r]}
    states = {r: _completed(dumps[r], allg[r], seq) for r in present}
    finished = [r for r, v in states.items() if v is True]
    held = holders[min(holders)] if holders else None
    op = held.op if held else None
    since = min((e.time_created_ns for e in holders.values() if e.time_created_ns), default=None)
    where = {r: e.where() for r, e in holders.items()}
    if absent:
        if finished:
            out.problems.append(
                f"{label}: no dump from rank(s) {_ranks(absent)}; {op} #{seq}, the last op of ranks {_ranks(present)}, "
                f"completed on rank(s) {_ranks(finished)}: nothing shows where the missing ranks are")
            return
        note = f"no dump from rank(s) {_ranks(absent)}; the others all wait in it, so they never arrived"
        caveat = None
        if any(v is None for v in states.values()):
            caveat = ("these dumps cannot say whether it completed (gloo's never do): the conclusion holds when "
                      "they were taken while the job hung")
        out.hangs.append(Hang(group.name, group.desc, op, seq, False, absent, absent, present, since, where=where,
                              last_entries={r: [] for r in absent}, note=note, caveat=caveat))
    elif (states and all(v is False for v in states.values())
          and not any(m.group == group.name and m.seq_id == seq and not m.p2p for m in out.mismatches)):
        out.hangs.append(Hang(group.name, group.desc, op, seq, False, [], [], present, since, where=where,
                              note="every member entered it and none completed it: not a missing rank "
                                   "(a stuck collective: the transport, a device, or a mismatch inside it)"))


# ProcessGroupNCCL names a point-to-point op after its two ends, in group ranks: "nccl:send 0->1" on the
# sender, "nccl:recv 1<-0" on the receiver. p2p_seq_id counts every p2p op of a rank in the group, whatever its
# peer, so in a pipeline the members' counts differ without anyone hanging: p2p ops are paired per channel
# (sender, receiver), the k-th send with the k-th recv.
_P2P_NAME = re.compile(r"\A(send|recv) (\d+)(->|<-)(\d+)\Z")


def _p2p_channel(e: Entry, group: _Group) -> tuple[int, int] | None:
    """(sender, receiver) as global ranks, or None when the op's name does not say (a coalesced batch)."""
    m = _P2P_NAME.match(e.op)
    if not m or (m[1] == "send") != (m[3] == "->"):
        return None
    me, peer = int(m[2]), int(m[4])
    if me != e.rank:  # the names are group ranks; the default group's are global ones
        members = group.members
        if not (0 <= me < len(members) and members[me] == e.rank and 0 <= peer < len(members)):
            return None
        peer = members[peer]
    return (e.rank, peer) if m[1] == "send" else (peer, e.rank)


def _join_p2p(group: _Group, dumps: dict[int, Dump], out: Analysis) -> None:
    label = group_label(group.name, group.desc)
    ops: dict[tuple[int, int], dict[int, list[Entry]]] = {}  # channel -> rank -> its ops on it, in order
    unpaired = 0
    for r in group.members:
        d = dumps.get(r)
        mine = d.groups.get(group.name) if d is not None else None
        if d is None or mine is None or not any(mine.is_p2p):
            continue
        for e in (_op(d, mine, i) for i, p2p in enumerate(mine.is_p2p) if p2p):
            channel = _p2p_channel(e, group)
            if channel is None:
                unpaired += 1
                continue
            ops.setdefault(channel, {}).setdefault(r, []).append(e)
    named = False
    for (sender, receiver), by_rank in sorted(ops.items()):
        sends, recvs = by_rank.get(sender, []), by_rank.get(receiver, [])
        for k in range(min(len(sends), len(recvs))):
            m = _compare(group, sends[k].seq, True, {sender: sends[k], receiver: recvs[k]})
            if m:
                out.mismatches.append(m)
                break
        if len(sends) == len(recvs):
            continue
        ahead, behind = (sender, receiver) if len(sends) > len(recvs) else (receiver, sender)
        extra = (sends if ahead == sender else recvs)[min(len(sends), len(recvs))]
        if extra.state == "completed":
            continue  # it got past it: not where anyone waits
        if behind in dumps and (dumps[behind].wrapped or dumps[ahead].wrapped):
            out.problems.append(f"{label}: the ring buffer wrapped on rank {ahead} or {behind}, so their p2p ops "
                                f"{sender}->{receiver} cannot be counted against each other; no culprit is named")
            continue
        absent = [] if behind in dumps else [behind]
        h = Hang(group.name, group.desc, extra.op, extra.seq, True, [behind], absent, [ahead], extra.time_created_ns,
                 where={ahead: extra.where()}, last_entries={behind: _last_entries(dumps.get(behind))})
        posted = len(recvs) if ahead == sender else len(sends)
        h.note = (f"rank {behind} posted {posted} of the {posted + 1} "
                  f"{'recv' if ahead == sender else 'send'}s rank {ahead} is waiting for on {sender}->{receiver}")
        if absent:
            h.note += f"; no dump from rank {behind}: where it is is unknown"
        out.hangs.append(h)
        named = True
    if unpaired and not named:
        out.problems.append(f"{label}: {unpaired} point-to-point op(s) do not name their peer (a coalesced "
                            "batch_isend_irecv?), so they are not paired")


def _rk(ranks: Sequence[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + _ranks(ranks)


def _ranks(ranks: Sequence[int]) -> str:
    return ", ".join(str(r) for r in ranks)


def analyze(dumps: Sequence[Dump], *, world_size: int | None = None, problems: Sequence[str] = ()) -> Analysis:
    out = Analysis(list(dumps), problems=list(problems))
    by_rank = {d.rank: d for d in dumps}
    if not dumps:
        out.problems.append("no readable dump")
        return out
    for d in dumps:
        if not d.size:
            out.problems.append(f"{d.path}: rank {d.rank}'s dump holds no entries (flight recorder off? TORCH_FR_BUFFER_SIZE=0)")
    for g in _groups(list(dumps), world_size, out.problems):
        _join(g, by_rank, out)
        _join_p2p(g, by_rank, out)
    missing_world = sorted({r for h in out.hangs for r in h.absent_dumps})
    if missing_world:
        out.problems.insert(0, f"no dump from rank(s) {_ranks(missing_world)}")
    return out


def analyze_paths(paths: Iterable[str | os.PathLike[str]], *, world_size: int | None = None) -> Analysis:
    dumps, problems = read_dumps(paths)
    return analyze(dumps, world_size=world_size, problems=problems)


# --- text ----------------------------------------------------------------------------------------------------


def _stamp(ns: int | None, full: bool = False) -> str | None:
    if not ns:
        return None
    t = time.localtime(ns / 1e9)
    return time.strftime("%Y-%m-%d %H:%M:%S" if full else "%H:%M:%S", t)


def _entry_text(e: Entry) -> str:
    where = e.where()
    return (f"{e.op} (p2p #{e.seq})" if e.is_p2p else f"{e.op} #{e.seq}") + (f" at {where}" if where else "") + (f" ({group_label(e.group, e.desc)})" if e.group != "0" else "")


def hang_lines(h: Hang) -> list[str]:
    label = h.label
    op = f"{h.op or 'op'} (p2p #{h.seq_id})" if h.p2p else f"{h.op or 'op'} #{h.seq_id}"
    since = _stamp(h.since_ns)
    waited = f"{len(h.waiting_ranks)} rank{'s' if len(h.waiting_ranks) != 1 else ''} waited" + (f" since {since}" if since else "")
    lines: list[str] = []
    seen = [r for r in h.missing_ranks if r not in h.absent_dumps]
    if h.absent_dumps and not seen:
        lines.append(f"no dump from {_rk(h.absent_dumps)}; {_rk(h.waiting_ranks)} {'all ' if len(h.waiting_ranks) > 1 else ''}"
                     f"wait{'s' if len(h.waiting_ranks) == 1 else ''} in {op} of {label}, so {_rk(h.absent_dumps)} "
                     f"never arrived; {waited}")
        if h.caveat:
            lines.append(f"  caveat: {h.caveat}")
    elif seen:
        lines.append(f"{_rk(seen)} never entered {op} ({label}); {waited}" +
                     (f"; no dump from {_rk(h.absent_dumps)}" if h.absent_dumps else ""))
    else:
        lines.append(f"every member of {label} entered {op} and none completed it; {waited}")
    for r in seen:
        last = h.last_entries.get(r) or []
        if last:
            lines.append(f"  rank {r}'s last collective: {_entry_text(last[-1])}")
            for e in reversed(last[:-1]):
                lines.append(f"    before it: {_entry_text(e)}")
        else:
            lines.append(f"  rank {r}'s dump holds no entry")
    sites = sorted({w for w in h.where.values() if w})
    if sites:
        lines.append(f"  the waiting ranks called it at {', '.join(sites)}")
    if h.note and not (h.absent_dumps and not seen):
        lines.append(f"  note: {h.note}")
    return lines


def mismatch_lines(m: Mismatch) -> list[str]:
    label = group_label(m.group, m.desc)
    kind = "p2p" if m.p2p else "collective"
    out = [f"mismatch in {label} {kind} #{m.seq_id}: different {m.what}"]
    for s in m.sides:
        detail = s["op"]
        if m.what in ("sizes", "dtypes", "op"):
            detail += f" in {s['input_sizes']} {s['input_dtypes'] or ''}".rstrip()
        where = sorted({w for w in s["where"].values() if w})
        out.append(f"  {_rk(s['ranks'])}: {detail}" + (f" at {', '.join(where)}" if where else ""))
    return out


def format_text(a: Analysis) -> list[str]:
    lines: list[str] = []
    for h in a.hangs:
        lines.extend(hang_lines(h))
    for m in a.mismatches:
        lines.extend(mismatch_lines(m))
    if not a.found and a.undecided:
        lines.append(f"cannot name a hang in {', '.join(a.undecided)}: the ring buffers no longer overlap (see the note)")
    elif not a.found:
        n = len(a.dumps)
        lines.append(f"no hang found in {n} dump{'s' if n != 1 else ''}" +
                     (f" (ranks {_ranks([d.rank for d in a.dumps])})" if n else ""))
    for p in a.problems:
        lines.append(f"note: {p}")
    return lines


def fold_into_report(report: Any, analysis: Analysis) -> list[str]:
    """The lines a scan report shows for the flight-recorder dumps of the same job.

    `report` is a `ScanReport` (only read: its findings' ranks tie the log to the dumps); nothing is changed.
    """
    if not analysis.found and not analysis.problems:
        return []
    lines = ["Flight recorder"]
    lines.extend("  " + line for line in format_text(analysis))
    culprits = sorted({r for h in analysis.hangs for r in h.missing_ranks})
    findings = list(getattr(report, "findings", None) or [])
    if culprits and findings:
        timeouts = sorted({r for f in findings if f.id and "timeout" in f.id for r in (f.ranks or [f.rank]) if r is not None})
        waiting = sorted({r for h in analysis.hangs for r in h.waiting_ranks})
        if timeouts and set(timeouts) <= set(waiting):
            lines.append(f"  the watchdog timeouts on rank(s) {_ranks(timeouts)} are the fallout: they waited for "
                         f"rank(s) {_ranks(culprits)}")
        initiating = getattr(report, "initiating", None)
        if initiating is not None and initiating.rank in culprits:
            lines.append(f"  rank {initiating.rank}'s own failure ({initiating.id or initiating.exception}) is why it never arrived")
    return lines
