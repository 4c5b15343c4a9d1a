"""Real flight-recorder dumps from torchrun + gloo on the CPU, analysed by `denpex-kb hang`.

Each rank of the job below writes its own `torch._C._distributed_c10d._dump_fr_trace()` bytes (gloo records the
collectives but writes no dump itself) to `fr_<rank>` before it exits. The hang is finite: the process group's
timeout is a few seconds, so the waiting ranks' collective raises, they dump, and every rank exits with
`os._exit` (no teardown that could hang or abort).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from denpex_kb import flight  # noqa: E402
from denpex_kb.cli import main  # noqa: E402

pytestmark = pytest.mark.repro

JOB = r'''
import datetime, os, sys, time, traceback
import torch, torch.distributed as dist

scenario = os.environ["FR_SCENARIO"]
out = os.environ["FR_OUT"]
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=4))
rank = dist.get_rank()
t = torch.ones(4)

def train():
    dist.all_reduce(t)
    dist.broadcast(t, 0)
    if scenario in ("skip", "skip-nodump"):
        dist.all_reduce(t)
        if rank != 1:
            dist.all_reduce(t)                          # rank 1 skips this one (all_reduce #4)
        else:
            time.sleep(7)                               # ... and stays alive while the others time out
    elif scenario == "groups":
        sub = dist.new_group([0, 1], group_desc="pair")
        dist.all_reduce(t)                              # default group #3: everyone
        dist.all_reduce(t, group=sub)                   # pair #1: ranks 0 and 1
        if rank == 0:
            dist.all_reduce(t, group=sub)               # pair #2: rank 1 never comes
        else:
            time.sleep(7)
    elif scenario == "mismatch":
        if rank == 0:
            dist.all_reduce(t)                          # #3: all_reduce on rank 0 ...
        else:
            dist.broadcast(t, 0)                        # ... broadcast on rank 1

try:
    train()
except Exception as exc:
    print(f"rank {rank}: {type(exc).__name__}", flush=True)
finally:
    if not (scenario == "skip-nodump" and rank == 1):
        with open(os.path.join(out, f"fr_{rank}"), "wb") as fh:
            fh.write(torch._C._distributed_c10d._dump_fr_trace())
    print(f"rank {rank} done", flush=True)
    sys.stdout.flush()
    os._exit(0)
'''


def _run(tmp_path: Path, scenario: str, nproc: int) -> Path:
    out = tmp_path / scenario
    out.mkdir()
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(JOB))
    env = dict(os.environ, OMP_NUM_THREADS="1", FR_SCENARIO=scenario, FR_OUT=str(out))
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc), str(script)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120, env=env, cwd=tmp_path,
    )
    assert proc.stdout.count(" done") == nproc, proc.stdout
    (tmp_path / f"{scenario}.log").write_text(proc.stdout)  # the job's own log, beside (not among) the dumps
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    cache: dict[str, Path] = {}

    def get(scenario: str, nproc: int = 3) -> Path:
        if scenario not in cache:
            cache[scenario] = _run(tmp_path_factory.mktemp("fr"), scenario, nproc)
        return cache[scenario]

    return get


def test_real_gloo_dump_format(runs):
    d = flight.read_dump(runs("skip") / "fr_0")
    assert d.rank == 0 and d.form == "pickle" and d.backend == "gloo"
    assert d.version == "2.10"  # torch 2.13's version_val
    # the gloo quirk PyTorch's analyzer trips on: pg_config keyed '' while entries say '0'
    assert list(d.pg_config) == [""]
    assert {e.group for e in d.entries} == {"0"}
    assert [e.collective_seq_id for e in d.entries] == [1, 2, 3, 4]
    assert d.entries[-1].where() == "job.py:17"  # the all_reduce rank 1 skips


def test_rank_skips_a_collective(runs, capsys):
    a = flight.analyze_paths([runs("skip")])
    [h] = a.hangs
    assert (h.group, h.op, h.seq_id) == ("0", "all_reduce", 4)
    assert h.missing_ranks == [1] and h.waiting_ranks == [0, 2] and h.absent_dumps == []
    assert h.last_entries[1][-1].collective_seq_id == 3
    assert main(["hang", str(runs("skip"))]) == 1
    text = capsys.readouterr().out
    assert "rank 1 never entered all_reduce #4 (default_pg); 2 ranks waited since " in text
    assert "rank 1's last collective: all_reduce #3 at job.py:15" in text


def test_rank_skips_and_its_dump_is_missing(runs, capsys):
    folder = runs("skip-nodump")
    assert sorted(p.name for p in folder.iterdir()) == ["fr_0", "fr_2"]
    assert main(["hang", "--json", str(folder / "fr_0"), str(folder / "fr_2")]) == 1
    out = json.loads(capsys.readouterr().out)
    [h] = out["hangs"]
    assert h["group"] == "default_pg" and h["op"] == "all_reduce" and h["collective_seq_id"] == 4
    assert h["missing_ranks"] == [1] and h["absent_dumps"] == [1] and h["waiting_ranks"] == [0, 2]
    assert h["last_entries"] == {"1": []}
    assert any("no dump from rank(s) 1" in p for p in out["problems"])
    # the last rank's dump missing as well: only --world-size can say rank 2 existed
    assert main(["hang", str(folder / "fr_0"), "--world-size", "3"]) == 1
    text = capsys.readouterr().out
    assert "no dump from ranks 1, 2; rank 0 waits in all_reduce #4 of default_pg, so ranks 1, 2 never arrived" in text


def test_two_process_groups(runs, capsys):
    a = flight.analyze_paths([runs("groups")])
    [h] = a.hangs
    assert (h.desc, h.op, h.seq_id, h.missing_ranks, h.waiting_ranks) == ("pair", "all_reduce", 2, [1], [0])
    assert main(["hang", str(runs("groups"))]) == 1
    assert "rank 1 never entered all_reduce #2 (pair)" in capsys.readouterr().out


def test_op_mismatch(runs, capsys):
    folder = runs("mismatch", 2)
    a = flight.analyze_paths([folder])
    [m] = a.mismatches
    assert m.seq_id == 3 and m.what == "op"
    assert [(s["ranks"], s["op"]) for s in m.sides] == [([0], "all_reduce"), ([1], "broadcast")]
    assert main(["hang", str(folder)]) == 1
    out = capsys.readouterr().out
    assert "mismatch in default_pg collective #3: different op" in out


def test_pytorch_analyzer_fails_where_we_do_not(runs):
    """The reason this reader exists: fr_trace on the same gloo dumps dies with a KeyError."""
    folder = runs("skip")
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace", str(folder), "--prefix", "fr_"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    assert proc.returncode != 0 and "KeyError" in proc.stdout, proc.stdout[-2000:]


def test_scan_shows_the_hang_with_the_log(runs, capsys):
    dumps = runs("skip")
    log = dumps.parent / "skip.log"
    main(["scan", str(log), "--fr", str(dumps)])
    text = capsys.readouterr().out
    assert "Flight recorder" in text and "rank 1 never entered all_reduce #4 (default_pg)" in text
    main(["scan", str(log), "--fr", str(dumps), "--json"])
    doc = json.loads(capsys.readouterr().out)
    [hang] = doc["flight_recorder"]["hangs"]
    assert hang["missing_ranks"] == [1] and hang["collective_seq_id"] == 4


def test_compact_store_equals_full_entries_on_real_dumps(runs):
    """On torch's own gloo dumps, the columns read straight from the entries equal those made from Entry
    objects (the lenient reader's), and so do the analyses; the column reader is the one that ran."""
    import dataclasses

    for folder in (runs("skip"), runs("skip-nodump"), runs("groups"), runs("mismatch", 2)):
        dumps, problems = flight.read_dumps([folder])
        assert not problems and all(d.built is None for d in dumps)
        full = [dataclasses.replace(d, **flight.dump._index_entries(d.entries)) for d in dumps]
        for d, e in zip(dumps, full, strict=True):
            assert (d.groups, d.size, d.backend, d.wrapped) == (e.groups, e.size, e.backend, e.wrapped)
            assert [x.to_dict() for x in d.tail] == [x.to_dict() for x in e.tail]
        assert flight.analyze(dumps).to_dict() == flight.analyze(full).to_dict()
