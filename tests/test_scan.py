"""`scan` on multi-rank logs assembled from real lines: the initiating failure, the collateral, folding, order."""

from __future__ import annotations

import contextlib
import gzip
import subprocess
import sys
from pathlib import Path

from denpex_kb import scan, scan_many

# Real lines (sources: the entries' examples) with the prefixes torchrun adds.
OOM = (
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of "
    "4.00 GiB of which 2.35 GiB is free. Of the allocated memory 825.15 MiB is allocated by PyTorch, and 24.85 MiB "
    "is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation."
)  # https://github.com/jhc13/taggui/issues/188
WATCHDOG = (
    "[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for "
    "600060 milliseconds before timing out."
)  # https://github.com/hiyouga/LlamaFactory/issues/7396
SIGTERM = "W1129 19:04:31.056000 5671 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 5786 closing signal SIGTERM"
FAILED = "E1129 19:04:31.067000 5671 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) local_rank: 1 (pid: 5787) of binary: /tmp/venv/bin/python"
CHILD = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: "
HEALTHY = [f"[rank{r}]: step {s} | loss {2.5 - s / 1000:.4f} | lr 3.0e-4" for s in range(50) for r in range(8)]


def job_log() -> list[str]:
    lines = list(HEALTHY)
    lines += ["[rank3]: Traceback (most recent call last):", '[rank3]:   File "train.py", line 88, in <module>', "[rank3]:     loss = model(batch)"]
    lines.append(f"[rank3]: {OOM}")
    lines += [f"[rank{r}]:{WATCHDOG}" for r in (0, 1, 2, 4, 5, 6, 7)]
    lines += [SIGTERM, FAILED, "Traceback (most recent call last):", '  File "/usr/bin/torchrun", line 8, in <module>', CHILD]
    return lines


def test_root_cause_first_then_collateral_grouped_by_rank():
    lines = job_log()
    report = scan(lines)
    init = report.initiating
    assert init is not None and init.id == "cuda-out-of-memory"
    assert (init.rank, init.line_number, init.role) == (3, lines.index(f"[rank3]: {OOM}") + 1, "initiating")
    assert init.values.get("requested") == "20.00 MiB"
    collateral = {f.id: f for f in report.collateral}
    assert collateral["nccl-watchdog-timeout"].ranks == [0, 1, 2, 4, 5, 6, 7]
    assert collateral["nccl-watchdog-timeout"].count == 7  # seven ranks folded into one finding
    assert "torchrun-child-failed" in collateral
    assert all(f.role == "collateral" for f in report.findings if f is not init)


def test_collateral_only_log_names_the_most_telling_fallout():
    lines = list(HEALTHY) + [f"[rank{r}]:{WATCHDOG}" for r in range(4)] + [SIGTERM, FAILED, CHILD]
    report = scan(lines)
    assert report.initiating is not None
    assert report.initiating.id == "nccl-watchdog-timeout"  # not the launcher's summary
    # ...but as the earliest symptom, not as the cause: the report says the cause is in another log.
    assert any(h.startswith("this log shows no root cause") for h in report.hints)
    from denpex_kb.output import render_scan

    text = render_scan(report)
    assert "Earliest symptom  nccl-watchdog-timeout" in text and "Initiating failure" not in text
    with_cause = scan(job_log())
    assert not any(h.startswith("this log shows no root cause") for h in with_cause.hints)
    assert "Initiating failure  cuda-out-of-memory" in render_scan(with_cause)


def test_unknown_exception_is_still_reported(tmp_path: Path):
    # A real traceback of an exception no entry knows, captured from Python itself.
    crash = subprocess.run([sys.executable, "-c", "batch = {}\nbatch['labels']"], capture_output=True, text=True)
    traceback = [f"[rank1]: {line}" for line in crash.stderr.splitlines()]
    lines = list(HEALTHY) + traceback + [f"[rank{r}]:{WATCHDOG}" for r in (0, 2, 3)] + [FAILED, CHILD]
    report = scan(lines)
    init = report.initiating
    assert init is not None and init.id is None
    assert init.exception == "KeyError" and init.rank == 1
    assert init.text == "KeyError: 'labels'"


def test_exit_code_of_a_killed_rank_is_read_as_a_signal():
    killed = "E1129 19:04:47.051000 5971 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -11) local_rank: 1 (pid: 5987) of binary: /tmp/venv/bin/python"
    report = scan([*HEALTHY, killed])
    assert report.initiating is not None and report.initiating.id == "segmentation-fault"


def test_files_in_any_order_give_the_same_report(tmp_path: Path):
    lines = job_log()
    a, b = tmp_path / "rank-a.log", tmp_path / "rank-b.log.gz"
    a.write_text("\n".join(lines[:300]) + "\n", encoding="utf-8")
    with gzip.open(b, "wt", encoding="utf-8") as fh:
        fh.write("\n".join(lines[300:]) + "\n")
    first = scan_many([a, b])
    second = scan_many([b, a])
    assert [f.to_dict() for f in first.findings] == [f.to_dict() for f in second.findings]
    assert first.initiating is not None and first.initiating.id == "cuda-out-of-memory"
    assert first.initiating.file == str(b)
    assert first.lines == len(lines)


def test_hard_wrapped_line_is_still_matched_by_match():
    from denpex_kb import match

    wrapped = (
        "[rank1]:[E424 01:17:25.031948957 ProcessGroupNCCL.cpp:1895] [PG ID 0 PG GUID 0(default_pg) Rank 1] Process group watchdog thread terminat\n"
        "ed with exception: [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4, OpType=BROADCAST, NumelIn=112, NumelOut=112,\n"
        " Timeout(ms)=1800000) ran for 1800010 milliseconds before timing out."
    )  # https://github.com/huggingface/open-r1/issues/620
    assert match(wrapped)[0].id == "nccl-watchdog-timeout"


def test_both_prefilter_engines_give_the_same_findings(tmp_path: Path):
    from denpex_kb import default_index
    from denpex_kb.passes import scan_stream
    from denpex_kb.prefilter import HyperscanPrefilter, Re2Prefilter
    from denpex_kb.scanner import _Collector

    log = tmp_path / "job.log"
    log.write_text("\n".join(job_log() * 3) + "\n", encoding="utf-8")
    index = default_index()
    literals = sorted(set(index.all_anchors) | {"Traceback (most recent call last)", "Error", "Exception", "Interrupt"})
    engines = [Re2Prefilter(literals)]
    with contextlib.suppress(ImportError):  # no Hyperscan wheel on this platform: the portable engine alone
        engines.append(HyperscanPrefilter(literals))
    results = []
    for engine in engines:
        collector = _Collector(index)
        with log.open("rb") as fh:
            lines, error = scan_stream(fh, collector, engine, None)
        assert error is None and lines == len(job_log()) * 3
        results.append([f.to_dict() for f in collector.report(lines, [str(log)]).findings])
    assert all(r == results[0] for r in results) and results[0]


def test_big_files_split_across_processes_give_the_same_report(tmp_path: Path, monkeypatch):
    from denpex_kb import passes, reading

    log = tmp_path / "big.log"
    log.write_text("\n".join(job_log() * 40) + "\n", encoding="utf-8")
    sequential = scan(log)
    monkeypatch.setattr(passes, "PARALLEL_MIN", 1)
    monkeypatch.setattr(reading, "CHUNK", 64 << 10)  # many windows per process, too

    def no_fallback(*args, **kwargs):
        raise AssertionError("the parallel path fell back to the sequential one")

    monkeypatch.setattr(passes, "scan_stream", no_fallback)
    parallel = scan(log)
    assert parallel.lines == sequential.lines == len(job_log()) * 40
    assert [f.to_dict() for f in parallel.findings] == [f.to_dict() for f in sequential.findings]


def test_fingerprint_sequence_strengthens_the_finding():
    # Captured with torch 2.13.0 on the CPU (kb/gradient-checkpointing-no-grad.yaml): the checkpoint warning,
    # then the autograd error, is the entry's fingerprint.
    warning = (
        "/tmp/venv/lib/python3.11/site-packages/torch/utils/checkpoint.py:238: UserWarning: None of the inputs have "
        "requires_grad=True. Gradients will be None"
    )
    error = "RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn"
    alone = scan([error]).initiating
    both = scan([warning, "Traceback (most recent call last):", '  File "/tmp/fw/cap/gc.py", line 7, in <module>', error]).initiating
    assert alone is not None and both is not None
    assert alone.id == both.id == "gradient-checkpointing-no-grad"
    assert both.values.get("fingerprint") is True and "fingerprint" not in alone.values
    assert both.score > alone.score
    far = scan([warning] + ["step"] * 500 + [error]).initiating  # beyond within_lines: no sequence
    assert far is not None and "fingerprint" not in far.values
