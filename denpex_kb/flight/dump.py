"""Flight-recorder dumps read into columns: the safe unpickler, the entries, each rank's ops per process group."""

from __future__ import annotations

import contextlib
import gc
import io
import json
import os
import pickle
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain, compress, islice
from operator import attrgetter, itemgetter, le, ne
from pathlib import Path
from typing import Any, TypeVar

MAX_DUMP_BYTES = 1 << 30  # a ring buffer of 20,000 entries with frames is tens of MB; refuse anything absurd

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


def to_int(value: Any, default: int | None = None) -> int | None:
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
        pg_id = to_int(pg_id)
    if isinstance(pg, (list, tuple)) and len(pg) >= 1:
        group = pg[0] if type(pg[0]) is str else str(pg[0])
        desc = (pg[1] if type(pg[1]) is str else str(pg[1])) if len(pg) > 1 else "undefined"
    else:  # 2.2: only the process group's uid
        group = str(pg_id) if pg_id is not None else "?"
        desc = "undefined"
    if "collective_seq_id" in raw:
        coll = get("collective_seq_id")
        if type(coll) is not int:
            coll = to_int(coll, 0) or 0
        p2p = get("p2p_seq_id", 0)
        if type(p2p) is not int:
            p2p = to_int(p2p, 0) or 0
        is_p2p = get("is_p2p", False)
        if type(is_p2p) is not bool:
            is_p2p = bool(is_p2p)
    else:  # 2.2: one seq_id per group, collectives and p2p alike
        seq = to_int(get("seq_id"), 0) or 0
        is_p2p = op.split(" ", 1)[0] in P2P_OPS
        coll, p2p = (0, seq) if is_p2p else (seq, 0)
    created = get("time_created_ns")
    if type(created) is not int:
        created = to_int(created)
        if created is None and get("time_created_us") is not None:
            us = to_int(get("time_created_us"))
            created = us * 1000 if us is not None else None
    record_id = get("record_id")
    if type(record_id) is not int:
        record_id = to_int(record_id, index) or 0
    op_id = get("op_id")
    if type(op_id) is not int:
        op_id = to_int(op_id)
    timeout = get("timeout_ms")
    if type(timeout) is not int:
        timeout = to_int(timeout)
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
        rank = to_int(top.get("rank")) if "rank" in top else to_int(top.get("global_rank"))
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
