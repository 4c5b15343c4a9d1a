"""The hang analysis of a set of ranks' dumps: which members never entered which op, and mismatched calls."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import islice
from operator import lt
from typing import Any

from .dump import P2P_OPS, Dump, Entry, Ops, read_dumps, to_int

# Ops whose input and output sizes must agree on every member (others, e.g. gather, scatter, all_to_all with
# uneven splits, legitimately differ by rank: only their op and dtypes are compared).
SAME_SIZE_OPS = {
    "all_reduce", "allreduce", "broadcast", "_broadcast_oop", "reduce", "_reduce_oop", "all_gather",
    "_allgather_base", "_all_gather_base", "all_gather_into_tensor", "allgather_into_tensor_coalesced",
    "reduce_scatter", "_reduce_scatter_base", "reduce_scatter_tensor", "reduce_scatter_tensor_coalesced",
    "allreduce_coalesced", "barrier",
}

def stamp(ns: int | None, full: bool = False) -> str | None:
    if not ns:
        return None
    t = time.localtime(ns / 1e9)
    return time.strftime("%Y-%m-%d %H:%M:%S" if full else "%H:%M:%S", t)



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
            "waiting_since": stamp(self.since_ns, full=True),
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
        ranks = [to_int(v) for v in value]
    elif isinstance(value, str):
        body = value.strip().strip("[]").strip()
        if not body:
            return None
        ranks = [to_int(part) for part in body.split(",")]
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
            done = to_int(st.get("last_completed_collective"))
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
            f"{label}: the ring buffer of rank(s) {ranks_text(unknown)} wrapped and holds no {kind} of this group; "
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
                f"{label}: the ranks' buffers no longer overlap (ring wrap): rank(s) {ranks_text(missing)} stopped at "
                f"{kind} #{low}, rank(s) {ranks_text(waiting)} hold only #{min(lo[r] for r in waiting)} and later; "
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
            h.note = f"rank(s) {ranks_text(done)} report #{seq} completed: the gap may be a slow rank rather than a hang"
        if absent:
            h.note = ((h.note + "; ") if h.note else "") + f"no dump from rank(s) {ranks_text(absent)}: where they are is unknown"
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
                f"{label}: no dump from rank(s) {ranks_text(absent)}; {op} #{seq}, the last op of ranks {ranks_text(present)}, "
                f"completed on rank(s) {ranks_text(finished)}: nothing shows where the missing ranks are")
            return
        note = f"no dump from rank(s) {ranks_text(absent)}; the others all wait in it, so they never arrived"
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


def ranks_phrase(ranks: Sequence[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ranks_text(ranks)


def ranks_text(ranks: Sequence[int]) -> str:
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
        out.problems.insert(0, f"no dump from rank(s) {ranks_text(missing_world)}")
    return out


def analyze_paths(paths: Iterable[str | os.PathLike[str]], *, world_size: int | None = None) -> Analysis:
    dumps, problems = read_dumps(paths)
    return analyze(dumps, world_size=world_size, problems=problems)
