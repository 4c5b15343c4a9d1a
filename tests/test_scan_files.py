"""Several files of one job: which failure came first, by the lines' timestamps when they all carry one, else
in reading order with a hint that says so; and the rank a per-rank file's path names."""

from __future__ import annotations

from pathlib import Path

from denpex_kb import scan_many
from denpex_kb.scanner import rank_from_path

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 4.00 GiB"
IMA = "RuntimeError: CUDA error: an illegal memory access was encountered"


def _job(tmp_path: Path, first: str, second: str) -> list[Path]:
    a, b = tmp_path / "rank0.log", tmp_path / "rank1.log"
    a.write_text(f"{first}Traceback (most recent call last):\n{first}{IMA}\n")
    b.write_text(f"{second}Traceback (most recent call last):\n{second}{OOM}\n")
    return [a, b]


def test_the_earliest_failure_across_files_is_the_earliest_in_time(tmp_path: Path):
    # rank1's out-of-memory happened 5 s before rank0's illegal memory access, though rank0's file comes first
    report = scan_many(_job(tmp_path, "[2024-05-01 10:00:06] ", "[2024-05-01 10:00:01] "))
    assert report.initiating is not None and report.initiating.id == "cuda-out-of-memory"
    assert not any("no timestamps" in h for h in report.hints)


def test_without_timestamps_the_earliest_is_in_reading_order_and_a_hint_says_so(tmp_path: Path):
    report = scan_many(_job(tmp_path, "", ""))
    assert report.initiating is not None and report.initiating.id == "cuda-illegal-memory-access"
    assert any("carry no timestamps" in h for h in report.hints)


def test_one_file_needs_no_hint(tmp_path: Path):
    log = tmp_path / "job.log"
    log.write_text(f"Traceback (most recent call last):\n{IMA}\nTraceback (most recent call last):\n{OOM}\n")
    report = scan_many([log])
    assert report.initiating is not None and not any("timestamps" in h for h in report.hints)


def test_rank_from_torchrun_log_dir_paths():
    assert rank_from_path("/logs/none_abc/attempt_0/3/stderr.log") == 3
    assert rank_from_path("logs/run/attempt_2/15/stdout.log.gz") == 15
    assert rank_from_path("/logs/3/stderr.log") is None  # not the torchrun layout: no guess
    assert rank_from_path("/logs/attempt_0/3/train.log") is None


def test_error_files_are_read_and_malformed_ones_reported(tmp_path: Path):
    import json

    from denpex_kb.elastic import read_error_file

    rank = tmp_path / "run" / "attempt_0" / "3"
    rank.mkdir(parents=True)
    good = rank / "error.json"
    stack = 'Traceback (most recent call last):\n  File "train.py", line 9, in main\n    raise KeyError("labels")\n'
    good.write_text(json.dumps({"message": {"message": "KeyError: 'labels'",
                                            "extraInfo": {"py_callstack": stack + "KeyError: 'labels'\n",
                                                          "timestamp": "1733000000"}}}))
    assert read_error_file(good)[-1] == "KeyError: 'labels'"
    (rank / "stderr.log").write_text("step 1 loss 2.0\n")
    report = scan_many([rank / "stderr.log"])
    assert report.initiating is not None and report.initiating.exception == "KeyError"
    assert report.initiating.rank == 3 and report.initiating.values["error_file"] is True
    bad = tmp_path / "error.json"
    bad.write_text("not json")
    assert read_error_file(bad) is None
    assert any("not a TorchElastic error file" in e for e in scan_many([bad, rank / "stderr.log"]).errors)
