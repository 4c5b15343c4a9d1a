"""Writes the constructed flight-recorder dumps of this directory (run it to regenerate them).

CONSTRUCTED, not captured: no GPU ran here. Each file follows the keys and value shapes of the writer of one
PyTorch release, read from the headers shipped in that release's wheel:

- torch 2.2.2 `TraceUtils.h` `NCCLTraceBuffer::dump()`: a bare list of entries (pg_id, seq_id, profiling_name,
  input_sizes, output_sizes, time_created_us, state, retired, frames).
- torch 2.4.1 `TraceUtils.h`: version "2.1"; version, pg_config, entries (record_id, pg_id, process_group,
  collective_seq_id, p2p_seq_id, op_id, profiling_name, time_created_ns, input/output sizes and dtypes, state,
  time_discovered_*_ns, retired, is_p2p, frames).
- torch 2.7.1 `FlightRecorder.hpp`: version "2.4"; adds pg_status and timeout_ms; `dump_json` (JSON form, no frames,
  0 for an unknown discovery time).
- torch 2.13.0 `FlightRecorder.hpp`/`FlightRecorderDetail.hpp`: version "2.10"; adds comm_lib_version,
  thread_id, thread_name.

Scenarios: `v2_10/` 4 ranks, rank 2 never enters all_reduce #6 (its last is broadcast #5 at train.py:88);
`v2_4_json/` 2 ranks, rank 1 never posts recv p2p #3; `v2_1/` 2 ranks, all_reduce #2 with different sizes;
`v2_2/` 2 ranks, bare lists, rank 1 behind at #3; `wrap/` 2 ranks whose buffers no longer overlap.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

HERE = Path(__file__).resolve().parent
T0 = 1_700_000_000_000_000_000  # ns


def frames(line: int, fn: str = "train_step", file: str = "/job/train.py") -> list[dict]:
    return [
        {"name": "all_reduce", "filename": "/usr/lib/python3/site-packages/torch/distributed/distributed_c10d.py", "line": 2288},
        {"name": "wrapper", "filename": "/usr/lib/python3/site-packages/torch/distributed/c10d_logger.py", "line": 83},
        {"name": fn, "filename": file, "line": line},
        {"name": "<module>", "filename": file, "line": 120},
    ]


def entry(v: str, rid: int, seq: int, op: str, *, p2p_seq: int = 0, is_p2p: bool = False, state: str = "completed",
          sizes=([[1024]], [[1024]]), dtype: str = "Float", line: int = 80, t: int = 0, pg=("0", "default_pg")) -> dict:
    e = {
        "record_id": rid, "pg_id": int(pg[0]), "process_group": tuple(pg), "collective_seq_id": seq,
        "p2p_seq_id": p2p_seq, "op_id": rid + 1, "profiling_name": f"nccl:{op}", "time_created_ns": T0 + t * 10**9,
        "input_sizes": sizes[0], "input_dtypes": [dtype] * len(sizes[0]), "output_sizes": sizes[1],
        "output_dtypes": [dtype] * len(sizes[1]), "state": state,
        "time_discovered_started_ns": T0 + t * 10**9 + 1000 if state != "scheduled" else None,
        "time_discovered_completed_ns": T0 + t * 10**9 + 5000 if state == "completed" else None,
        "retired": state == "completed", "is_p2p": is_p2p, "frames": frames(line),
    }
    if v in ("2.4", "2.10"):
        e["timeout_ms"] = 600000
    if v == "2.10":
        e["thread_id"], e["thread_name"] = "140000000000000", "pt_main_thread"
    return e


def top(v: str, ranks: list[int], entries: list[dict], status: dict | None = None) -> dict:
    d = {"version": v, "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[" + ", ".join(map(str, ranks)) + "]"}},
         "entries": entries}
    if v in ("2.4", "2.10"):
        d["pg_status"] = {"0": status or {"last_enqueued_collective": max(e["collective_seq_id"] for e in entries),
                                          "last_started_collective": -1, "last_completed_collective": -1}}
    if v == "2.10":
        d["comm_lib_version"] = "2.21.5"
    return d


def v2_10() -> None:
    out = HERE / "v2_10"
    out.mkdir(exist_ok=True)
    for r in range(4):
        es = [entry("2.10", i, i + 1, "all_reduce", t=i, line=80) for i in range(4)]
        es.append(entry("2.10", 4, 5, "broadcast", t=4, line=88))
        if r != 2:
            es.append(entry("2.10", 5, 6, "all_reduce", state="started", t=5, line=92))
        done = 5
        st = {"last_enqueued_collective": len(es), "last_started_collective": len(es), "last_completed_collective": done}
        (out / f"nccl_trace_rank_{r}").write_bytes(pickle.dumps(top("2.10", [0, 1, 2, 3], es, st), protocol=2))


def v2_4_json() -> None:
    out = HERE / "v2_4_json"
    out.mkdir(exist_ok=True)
    for r in range(2):
        es = [entry("2.4", 0, 1, "all_reduce", t=0)]
        for k in range(1, 4 if r == 0 else 3):
            op = "send 0->1" if r == 0 else "recv 1<-0"
            es.append(entry("2.4", k, 1, op, p2p_seq=k, is_p2p=True, t=k, line=100,
                            state="started" if (r == 0 and k == 3) else "completed"))
        for e in es:
            del e["frames"]  # dump_json writes no frames
            e["process_group"] = list(e["process_group"])
            for key in ("time_discovered_started_ns", "time_discovered_completed_ns"):
                e[key] = e[key] or 0
        d = top("2.4", [0, 1], es, {"last_enqueued_collective": 1, "last_started_collective": 1, "last_completed_collective": 1})
        (out / f"fr_rank{r}.json").write_text(json.dumps(d))


def v2_1() -> None:
    out = HERE / "v2_1"
    out.mkdir(exist_ok=True)
    for r in range(2):
        es = [entry("2.1", 0, 1, "all_reduce", t=0),
              entry("2.1", 1, 2, "all_reduce", state="started", t=1, line=95,
                    sizes=([[1024]], [[1024]]) if r == 0 else ([[2048]], [[2048]]))]
        (out / f"nccl_trace_rank_{r}").write_bytes(pickle.dumps(top("2.1", [0, 1], es), protocol=2))


def v2_2() -> None:
    out = HERE / "v2_2"
    out.mkdir(exist_ok=True)
    for r in range(2):
        n = 4 if r == 0 else 3
        es = [{"pg_id": 0, "seq_id": i + 1, "profiling_name": "nccl:all_reduce", "input_sizes": [[8]],
               "output_sizes": [[8]], "time_created_us": (T0 + i * 10**9) // 1000,
               "state": "started" if i == n - 1 and r == 0 else "completed", "retired": False,
               "frames": frames(70 + i)} for i in range(n)]
        (out / f"nccl_trace_rank_{r}").write_bytes(pickle.dumps(es, protocol=2))


def wrap() -> None:
    out = HERE / "wrap"
    out.mkdir(exist_ok=True)
    spans = {0: range(3000, 5000), 1: range(2000)}  # record ids: rank 0's buffer wrapped long ago
    for r, ids in spans.items():
        es = [entry("2.10", i, i + 1, "all_reduce", t=i, state="completed") for i in ids]
        es[-1]["state"] = "started"
        (out / f"nccl_trace_rank_{r}").write_bytes(pickle.dumps(top("2.10", [0, 1], es), protocol=2))


if __name__ == "__main__":
    v2_10()
    v2_4_json()
    v2_1()
    v2_2()
    wrap()
