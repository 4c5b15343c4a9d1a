"""Times `denpex-kb hang` on 1,024 ranks x 2,000 entries (flight recorder's default buffer size in torch 2.13).

Writes constructed version-"2.10" NCCL dumps (one rank skips the last all_reduce) to a temporary directory, then
times reading them with the restricted unpickler and the analysis, on one core (run it with `taskset -c 0`), as
many times as asked, with the load average before each run, and the medians.

    taskset -c 0 python benchmarks/flight_bench.py [--ranks 1024] [--entries 2000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's code, not an installed copy
from denpex_kb import flight


def make(folder: Path, ranks: int, entries: int) -> int:
    frames = [{"name": "all_reduce", "filename": "/site-packages/torch/distributed/distributed_c10d.py", "line": 2288},
              {"name": "train_step", "filename": "/job/train.py", "line": 88}]
    total = 0
    for r in range(ranks):
        n = entries - 1 if r == ranks // 2 else entries
        es = [{"record_id": i, "pg_id": 0, "process_group": ("0", "default_pg"), "collective_seq_id": i + 1,
               "p2p_seq_id": 0, "op_id": i + 1, "profiling_name": "nccl:all_reduce", "time_created_ns": 10**18 + i,
               "input_sizes": [[1024, 1024]], "input_dtypes": ["BFloat16"], "output_sizes": [[1024, 1024]],
               "output_dtypes": ["BFloat16"], "state": "completed" if i < n - 1 else "started",
               "time_discovered_started_ns": 10**18 + i, "time_discovered_completed_ns": 10**18 + i,
               "retired": True, "timeout_ms": 600000, "is_p2p": False, "thread_id": "1", "thread_name": "main",
               "frames": [dict(f) for f in frames]} for i in range(n)]
        d = {"version": "2.10", "comm_lib_version": "2.21.5", "entries": es,
             "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[" + ", ".join(map(str, range(ranks))) + "]"}},
             "pg_status": {"0": {"last_enqueued_collective": n, "last_started_collective": n, "last_completed_collective": n - 1}}}
        data = pickle.dumps(d, protocol=2)
        total += len(data)
        (folder / f"nccl_trace_rank_{r}").write_bytes(data)
    return total


def run(folder: Path, ranks: int, entries: int) -> list[float]:
    """Wall and CPU seconds of reading, analysis, release and the total, as `denpex-kb hang` runs them: the cyclic
    collector paused while the dumps are alive, then released."""
    t0, c0 = time.perf_counter(), time.process_time()
    with flight.paused_collector():
        dumps, problems = flight.read_dumps([folder])
        t1, c1 = time.perf_counter(), time.process_time()
        a = flight.analyze(dumps, problems=problems)
        t2, c2 = time.perf_counter(), time.process_time()
        [h] = a.hangs
        assert h.missing_ranks == [ranks // 2] and h.seq_id == entries, h
        del dumps, a
    t3, c3 = time.perf_counter(), time.process_time()
    return [t1 - t0, t2 - t1, t3 - t2, t3 - t0, c1 - c0, c2 - c1, c3 - c2, c3 - c0]


def line(f: list[float]) -> str:
    return (f"read {f[0]:.1f} s, analysis {f[1]:.1f} s, release {f[2]:.1f} s, total {f[3]:.1f} s wall; "
            f"CPU {f[4]:.1f} + {f[5]:.1f} + {f[6]:.1f} = {f[7]:.1f} s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--entries", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        size = make(folder, args.ranks, args.entries)
        print(f"{args.ranks} ranks x {args.entries} entries ({size / 1e6:.0f} MB of pickles):")
        runs = []
        for _ in range(args.repeat):
            load = os.getloadavg()[0]
            runs.append(run(folder, args.ranks, args.entries))
            print(f"  load average {load:.1f}: {line(runs[-1])}", flush=True)
        if args.repeat > 1:
            print(f"  median: {line([statistics.median(r[i] for r in runs) for i in range(8)])}")


if __name__ == "__main__":
    main()
