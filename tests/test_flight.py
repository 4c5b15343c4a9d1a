"""The flight-recorder reader and hang analysis, on constructed NCCL-format dumps (tests/fixtures_flight/).

The fixtures are CONSTRUCTED from the writers' documented keys (see tests/fixtures_flight/make_fixtures.py);
real gloo dumps are made by tests/repro/test_repro_flight.py.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
from pathlib import Path

import pytest

from denpex_kb import flight
from denpex_kb.cli import main

FIX = Path(__file__).resolve().parent / "fixtures_flight"


def test_fixtures_are_current(tmp_path, monkeypatch):
    """The committed files are what make_fixtures.py writes (regenerate them after changing it)."""
    sys.path.insert(0, str(FIX))
    try:
        import make_fixtures
    finally:
        sys.path.remove(str(FIX))
    monkeypatch.setattr(make_fixtures, "HERE", tmp_path)
    for fn in (make_fixtures.v2_10, make_fixtures.v2_4_json, make_fixtures.v2_1, make_fixtures.v2_2):
        fn()
    for made in tmp_path.rglob("*"):
        if made.is_file():
            assert made.read_bytes() == (FIX / made.relative_to(tmp_path)).read_bytes(), made


def test_reads_each_version():
    d = flight.read_dump(FIX / "v2_10" / "nccl_trace_rank_3")
    assert (d.rank, d.version, d.form, d.backend, d.comm_lib_version) == (3, "2.10", "pickle", "nccl", "2.21.5")
    assert d.pg_config["0"]["ranks"] == "[0, 1, 2, 3]"
    e = d.entries[-1]
    assert (e.op, e.collective_seq_id, e.state, e.where()) == ("all_reduce", 6, "started", "train.py:92")
    j = flight.read_dump(FIX / "v2_4_json" / "fr_rank0.json")
    assert (j.rank, j.version, j.form) == (0, "2.4", "json")
    assert j.entries[-1].is_p2p and j.entries[-1].p2p_seq_id == 3 and j.entries[-1].frames == []
    old = flight.read_dump(FIX / "v2_1" / "nccl_trace_rank_1")
    assert old.version == "2.1" and old.pg_status == {} and old.entries[1].input_sizes == [[2048]]
    bare = flight.read_dump(FIX / "v2_2" / "nccl_trace_rank_0")
    assert bare.version is None and [e.collective_seq_id for e in bare.entries] == [1, 2, 3, 4]
    assert bare.entries[0].time_created_ns == flight.read_dump(FIX / "v2_2" / "nccl_trace_rank_1").entries[0].time_created_ns


@pytest.mark.parametrize("name,rank", [("nccl_trace_rank_12", 12), ("fr_3", 3), ("trace7.json", 7), ("dump-0.pkl", 0), ("x", None)])
def test_rank_from_any_prefix(name, rank):
    assert flight.rank_from_name(name) == rank


def test_rank_from_content_when_the_name_has_none(tmp_path):
    (tmp_path / "dump").write_bytes(pickle.dumps({"version": "2.10", "rank": 5, "entries": []}))
    assert flight.read_dump(tmp_path / "dump").rank == 5
    (tmp_path / "other").write_bytes(pickle.dumps({"version": "2.10", "entries": []}))
    with pytest.raises(flight.DumpError, match="cannot tell the rank"):
        flight.read_dump(tmp_path / "other")


def test_rank_never_entered(capsys):
    a = flight.analyze_paths([FIX / "v2_10"])
    [h] = a.hangs
    assert (h.group, h.op, h.seq_id, h.missing_ranks, h.waiting_ranks, h.absent_dumps) == ("0", "all_reduce", 6, [2], [0, 1, 3], [])
    assert main(["hang", str(FIX / "v2_10")]) == 1
    out = capsys.readouterr().out
    assert "rank 2 never entered all_reduce #6 (default_pg); 3 ranks waited since " in out
    assert "rank 2's last collective: broadcast #5 at train.py:88" in out


def test_absent_dump_still_concludes(capsys):
    files = [str(FIX / "v2_10" / f"nccl_trace_rank_{r}") for r in (0, 1, 3)]
    assert main(["hang", "--json", *files]) == 1
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"hangs", "mismatches", "problems"}
    [h] = out["hangs"]
    assert set(h) >= {"group", "op", "collective_seq_id", "missing_ranks", "absent_dumps", "waiting_ranks", "last_entries"}
    assert (h["group"], h["op"], h["collective_seq_id"]) == ("default_pg", "all_reduce", 6)
    assert h["missing_ranks"] == [2] and h["absent_dumps"] == [2] and h["waiting_ranks"] == [0, 1, 3]
    assert h["caveat"] is None  # NCCL entries say the op is still running: no assumption needed
    assert main(["hang", *files]) == 1
    assert ("no dump from rank 2; ranks 0, 1, 3 all wait in all_reduce #6 of default_pg, so rank 2 never arrived"
            in capsys.readouterr().out)


def test_p2p_joined_on_p2p_seq_id():
    [h] = flight.analyze_paths([FIX / "v2_4_json"]).hangs
    assert h.p2p and h.seq_id == 3 and h.op == "send 0->1" and h.missing_ranks == [1]
    assert h.to_dict()["p2p_seq_id"] == 3 and h.to_dict()["collective_seq_id"] is None


def _fixture_module():
    sys.path.insert(0, str(FIX))
    try:
        import make_fixtures
    finally:
        sys.path.remove(str(FIX))
    return make_fixtures


def test_p2p_pipeline_names_only_the_rank_that_never_posted():
    """Three pipeline stages (0 sends to 1, 1 to 2): rank 1 holds twice as many p2p ops as its neighbours, and
    p2p_seq_id counts them all, so joining the members on it compares unrelated ops (rank 0's fourth send with
    rank 1's second recv) and names the wrong op and waiters. Paired per channel: rank 2 never posted its fourth
    recv from 1, and rank 1 alone waits, in send 1->2. (Constructed dumps, version 2.10.)"""
    mf = _fixture_module()
    per_rank: dict[int, list] = {0: [], 1: [], 2: []}
    seq = {0: 0, 1: 0, 2: 0}

    def op(r: int, name: str, state: str = "completed") -> None:
        seq[r] += 1
        per_rank[r].append(mf.entry("2.10", len(per_rank[r]), 0, name, p2p_seq=seq[r], is_p2p=True, t=len(per_rank[r]),
                                    line=120, state=state))

    for k in range(4):
        op(0, "send 0->1")
        op(1, "recv 1<-0")
        op(1, "send 1->2", state="started" if k == 3 else "completed")
        if k < 3:
            op(2, "recv 2<-1")
    dumps = [flight.parse_dump(pickle.dumps(mf.top("2.10", [0, 1, 2], es), protocol=2), rank=r)
             for r, es in per_rank.items()]
    a = flight.analyze(dumps)
    [h] = a.hangs
    assert (h.op, h.seq_id, h.missing_ranks, h.waiting_ranks) == ("send 1->2", 8, [2], [1])
    assert "rank 2 posted 3 of the 4 recvs rank 1 is waiting for on 1->2" in h.note
    assert not a.mismatches


def test_p2p_without_peers_is_not_paired():
    mf = _fixture_module()
    dumps = [flight.parse_dump(pickle.dumps(mf.top("2.10", [0, 1], [
        mf.entry("2.10", 0, 0, "coalesced", p2p_seq=1, is_p2p=True, state="started")]), protocol=2), rank=r)
        for r in (0, 1)]
    a = flight.analyze(dumps)
    assert not a.hangs and any("do not name their peer" in p for p in a.problems)


def test_size_mismatch_both_sides(capsys):
    a = flight.analyze_paths([FIX / "v2_1"])
    [m] = a.mismatches
    assert (m.seq_id, m.what) == (2, "sizes") and a.hangs == []
    assert [(s["ranks"], s["input_sizes"]) for s in m.sides] == [([0], [[1024]]), ([1], [[2048]])]
    assert main(["hang", str(FIX / "v2_1")]) == 1
    assert "rank 1: all_reduce in [[2048]]" in capsys.readouterr().out


def test_v2_2_bare_list():
    [h] = flight.analyze_paths([FIX / "v2_2"]).hangs
    assert (h.seq_id, h.missing_ranks) == (4, [1])


def test_ring_wrap_says_so(capsys):
    a = flight.analyze_paths([FIX / "wrap"])
    assert a.hangs == [] and a.undecided == ["default_pg"]
    assert any("no longer overlap" in p for p in a.problems)
    assert main(["hang", str(FIX / "wrap")]) == 3  # undecided: neither healthy (0) nor a hang (1)
    assert "cannot name a hang in default_pg" in capsys.readouterr().out


def _gloo_like(tmp_path: Path, ranks_entries: dict[int, int]) -> Path:
    """pg_config keyed '' with no ranks, entries keyed '0': what torch 2.13's gloo writes."""
    for r, n in ranks_entries.items():
        es = [{"record_id": i, "pg_id": 0, "process_group": ("0", "default_pg"), "collective_seq_id": i + 1,
               "p2p_seq_id": 0, "op_id": i + 1, "profiling_name": "gloo:all_reduce", "input_sizes": [[4]],
               "output_sizes": [[4]], "input_dtypes": ["Float"], "output_dtypes": ["Float"], "state": "scheduled",
               "time_created_ns": 1, "retired": True, "is_p2p": False, "frames": []} for i in range(n)]
        d = {"version": "2.10", "pg_config": {"": {"name": "", "desc": "", "ranks": "[]"}}, "comm_lib_version": "",
             "pg_status": {"0": {"last_enqueued_collective": n, "last_started_collective": -1, "last_completed_collective": n}},
             "entries": es}
        (tmp_path / f"fr_{r}").write_bytes(pickle.dumps(d, protocol=2))
    return tmp_path


def test_gloo_pg_config_rebuilt(tmp_path):
    a = flight.analyze_paths([_gloo_like(tmp_path, {0: 3, 1: 2, 2: 3})])
    [h] = a.hangs
    assert (h.seq_id, h.missing_ranks, h.note) == (3, [1], None)  # gloo's pg_status "completed" is not trusted
    assert any("rebuilt from the entries" in p and "as gloo writes it" in p for p in a.problems)


def test_healthy_exit_0(tmp_path, capsys):
    assert main(["hang", str(_gloo_like(tmp_path, {0: 3, 1: 3}))]) == 0
    assert "no hang found in 2 dumps" in capsys.readouterr().out


class _Evil:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_hostile_pickle_is_refused_and_runs_nothing(tmp_path, capsys):
    marker = tmp_path / "pwned"
    evil = tmp_path / "nccl_trace_rank_0"
    evil.write_bytes(pickle.dumps({"version": "2.10", "entries": [_Evil(str(marker))]}))
    with pytest.raises(flight.DumpError, match=r"refused: the pickle asks for (posix|os|nt)\.system"):
        flight.read_dump(evil)
    assert main(["hang", str(evil)]) == 2
    assert "refused" in capsys.readouterr().err
    assert not marker.exists()
    # and the same with a good dump beside it: the good one is analysed, the exit is still 2
    good = FIX / "v2_10" / "nccl_trace_rank_1"
    assert main(["hang", str(evil), str(good)]) == 2
    assert not marker.exists()


@pytest.mark.parametrize("data", [b"", b"not a dump", b"\x80\x02}q\x00", b"{\"foo\": 1}", b"\x80\x04\x95"])
def test_unreadable_input_is_a_clear_error(tmp_path, data):
    p = tmp_path / "fr_0"
    p.write_bytes(data)
    with pytest.raises(flight.DumpError):
        flight.read_dump(p)


def test_usage_errors(tmp_path, capsys):
    assert main(["hang", str(tmp_path / "nope")]) == 2
    assert main(["hang", str(tmp_path)]) == 2  # an empty directory
    assert "denpex-kb hang:" in capsys.readouterr().err


def test_fold_into_report():
    from denpex_kb.scanner import Finding, ScanReport

    a = flight.analyze_paths([FIX / "v2_10"])
    timeout = Finding(id="nccl-watchdog-timeout", line_number=3, rank=0, role="collateral", text="...", score=50, ranks=[0, 1, 3])
    report = ScanReport(findings=[timeout], initiating=None, lines=10, files=["job.log"])
    lines = flight.fold_into_report(report, a)
    assert lines[0] == "Flight recorder"
    assert any("rank 2 never entered all_reduce #6" in line for line in lines)
    assert any("watchdog timeouts on rank(s) 0, 1, 3 are the fallout" in line for line in lines)
    healthy = flight.analyze([flight.read_dump(FIX / "v2_10" / "nccl_trace_rank_0")])
    assert isinstance(flight.fold_into_report(report, healthy), list)


def test_the_collector_is_paused_only_for_the_block():
    import gc

    assert gc.isenabled()
    with flight.paused_collector():
        assert not gc.isenabled()
        with flight.paused_collector():  # nested, as hang's command around read_dumps
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(KeyError), flight.paused_collector():
        raise KeyError("x")
    assert gc.isenabled()


def test_entries_out_of_record_order_are_joined_in_order(tmp_path):
    """A dump whose entries are not in record order (a reordering writer, a hand-merged file) still gives the
    right hang: each group's entries are ordered by record id once, before the join."""
    mf = _fixture_module()
    es = [mf.entry("2.10", i, i + 1, "all_reduce", t=i, state="completed" if i < 3 else "started") for i in range(4)]
    for r in range(3):
        mine = es if r != 1 else es[:3]
        (tmp_path / f"nccl_trace_rank_{r}").write_bytes(pickle.dumps(mf.top("2.10", [0, 1, 2], list(reversed(mine)))))
    dumps, problems = flight.read_dumps([tmp_path])
    [h] = flight.analyze(dumps, problems=problems).hangs
    assert (h.missing_ranks, h.seq_id, h.op) == ([1], 4, "all_reduce")
    assert [e.record_id for e in dumps[0].by_group["0"]] == [0, 1, 2, 3]


# --- the compact store: join keys in columns, full entries only for what a report shows ----------------------


@pytest.fixture
def utc(monkeypatch):
    """Times are printed in local time: pin it, as analyses.json was written."""
    import time

    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_same_analyses_as_before_the_compact_store(utc):
    """analyses.json holds what the analysis said on the fixtures when it still built an Entry per op (the
    commit before the compact store): the same hangs, mismatches, last entries, text, to the character."""
    expected = json.loads((FIX / "analyses.json").read_text())
    assert len(expected) == 7
    for name, case in expected.items():
        a = flight.analyze_paths([FIX / p for p in case["paths"]], world_size=case["world_size"])
        doc = json.loads(json.dumps(a.to_dict(), default=str))
        for d in doc["dumps"]:
            d["path"] = os.path.basename(d["path"])
        assert doc == case["analysis"], name
        assert flight.format_text(a) == case["text"], name


def _from_full_entries(d: flight.Dump) -> flight.Dump:
    """The same dump with its index made from full entries (the lenient reader's path)."""
    import dataclasses

    return dataclasses.replace(d, **flight.dump._index_entries(d.entries))


def _index_fields(d: flight.Dump) -> tuple:
    return (d.groups, [e.to_dict() for e in d.tail], d.size, d.backend, d.wrapped)


def assert_same_as_full_entries(dumps: list[flight.Dump]) -> None:
    """Columns read straight from the entries equal the columns made from Entry objects, and so do analyses."""
    lenient = [_from_full_entries(d) for d in dumps]
    for d, e in zip(dumps, lenient, strict=True):
        assert _index_fields(d) == _index_fields(e), d.path
    assert flight.analyze(dumps).to_dict() == flight.analyze(lenient).to_dict()


def _random_job(seed: int) -> list[flight.Dump]:
    """Constructed dumps (make_fixtures' writer keys): two groups, p2p ops with and without peers, ranks that
    stop early, wrapped or reordered buffers, a size or dtype mismatch, the JSON form."""
    import random

    mf, rng = _fixture_module(), random.Random(seed)
    v, n = rng.choice(["2.1", "2.4", "2.10"]), rng.randint(2, 5)
    groups = [("0", "default_pg", list(range(n))), ("1", rng.choice(["pair", "undefined"]), sorted(rng.sample(range(n), 2)))]
    ops = [(rng.randrange(2), rng.choice(["all_reduce", "broadcast", "gather", "p2p"]), rng.choice([[[1024]], [[8, 8]]]))
           for _ in range(rng.randint(1, 25))]
    dumps = []
    for r in range(n):
        es, seqs = [], {"0": 0, "1": 0, "p0": 0, "p1": 0}
        for i, (g, op, sizes) in enumerate(ops[:len(ops) if rng.random() < 0.7 else rng.randint(0, len(ops))]):
            name, desc, members = groups[g]
            if r not in members:
                continue
            if op == "p2p":
                me, peer = members.index(r), (members.index(r) + 1) % len(members)
                seqs["p" + name] += 1
                op = rng.choice([f"send {me}->{peer}", f"recv {me}<-{peer}", "coalesced"])
                es.append(mf.entry(v, len(es), seqs[name], op, p2p_seq=seqs["p" + name], is_p2p=True, t=i, pg=(name, desc),
                                   state=rng.choice(["completed", "started"])))
                continue
            seqs[name] += 1
            odd = seed % 3 == 0 and r == 1 and i == len(ops) // 2
            es.append(mf.entry(v, len(es), seqs[name], op, sizes=([[7]], [[7]]) if odd else (sizes, sizes),
                               dtype="Half" if odd and seed % 2 else "Float", t=i, pg=(name, desc), line=80 + i % 2,
                               state=rng.choice(["completed", "started", "scheduled"])))
        if len(es) > 3 and rng.random() < 0.2:
            es = es[rng.randint(1, len(es) - 2):]  # the ring buffer wrapped
        if rng.random() < 0.15:
            es.reverse()
        top = mf.top(v, list(range(n)), es) if es else {"version": v, "entries": []}
        if v == "2.4" and rng.random() < 0.5:
            data = json.dumps({**top, "entries": [{k: list(x) if isinstance(x, tuple) else x for k, x in e.items()
                                                   if k != "frames"} for e in es]}).encode()
        else:
            data = pickle.dumps(top, protocol=2)
        dumps.append(flight.parse_dump(data, path=f"fr_{r}", rank=r))
    return dumps


def test_compact_store_equals_full_entries_on_the_fixtures():
    for sub in ("v2_10", "v2_4_json", "v2_1", "v2_2", "wrap"):
        dumps, problems = flight.read_dumps([FIX / sub])
        assert not problems
        assert_same_as_full_entries(dumps)


@pytest.mark.parametrize("seed", range(60))
def test_compact_store_equals_full_entries_on_constructed_jobs(seed):
    assert_same_as_full_entries(_random_job(seed))


def test_the_column_reader_covers_the_writers_dumps():
    """Dumps of version 2.1 and later, pickled or JSON, are read column by column; 2.2's bare lists are not."""
    def fast(path: Path) -> bool:
        obj = json.loads(path.read_bytes()) if path.suffix == ".json" else flight.safe_loads(path.read_bytes())
        return flight.dump._fast_index(obj["entries"] if isinstance(obj, dict) else obj) is not None

    assert all(fast(p) for sub in ("v2_10", "v2_1", "wrap", "v2_4_json") for p in (FIX / sub).iterdir())
    assert not any(fast(p) for p in (FIX / "v2_2").iterdir())


@pytest.mark.parametrize("key,value,columns", [
    ("collective_seq_id", True, False), ("record_id", "3", False), ("process_group", ["0"], False),
    ("frames", [{"filename": "/job/train.py", "line": 80.0}], True), ("input_dtypes", None, False),
    ("input_sizes", ((1024,),), False), ("input_sizes", [[1024.0]], True), ("input_sizes", [[True]], True),
])
def test_odd_values_give_the_same_analysis(key, value, columns):
    """A value of another type than the writers' (a hand-edited dump) gives the same analysis as full entries:
    the column reader leaves to the lenient per-entry reader what it does not cover; sizes of other numbers
    ([[1024.0]], [[True]]) equal to the op's before it are read as the same call, as `_same_call` says."""
    mf = _fixture_module()
    dumps = []
    for r in range(3):
        es = [mf.entry("2.10", i, i + 1, "all_reduce", t=i, line=80) for i in range(4 if r != 1 else 3)]
        if r != 2:
            es[-1][key] = value
        raw = mf.top("2.10", [0, 1, 2], es)
        assert (flight.dump._fast_index(raw["entries"]) is not None) == (columns or r == 2)
        dumps.append(flight.parse_dump(pickle.dumps(raw, protocol=2), path=f"fr_{r}", rank=r))
    assert_same_as_full_entries(dumps)


def test_full_entries_only_on_demand():
    d = flight.read_dump(FIX / "v2_10" / "nccl_trace_rank_0")
    assert d.built is None  # read column by column: no Entry per op was made
    assert d.groups["0"].seq == [1, 2, 3, 4, 5, 6] and d.groups["0"].pos == [0, 1, 2, 3, 4, 5]
    assert [e.record_id for e in d.tail] == [3, 4, 5] and d.tail[-1].where() == "train.py:92"
    assert d.entry(4).to_dict() == d.entries[4].to_dict() and d.entries[4].where() == "train.py:88"
    assert d.size == len(d.entries) == 6
