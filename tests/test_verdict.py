"""The verdict: retry as is, retry elsewhere (naming what to exclude), fix first, or unknown, from whole logs.

The logs are assembled from real lines: a healthy training line of the benign corpus opens the job, and the
failures are match examples of the entries (each real, with its provenance in kb/), with the prefixes that
launchers and the kernel log put in front of them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import KB, variant
from denpex_kb import scan
from denpex_kb.cli import main
from denpex_kb.examples import find_benign_dir
from denpex_kb.loader import load_kb
from denpex_kb.verdict import EXIT_CODES, parse_stamp

_KB = load_kb(KB)
JOB_START = "[2026-11-29 19:24:33,302] [INFO] [train] step 5 loss 0.0430 lr 1.00e-03"  # tests/corpus/benign/checkpoint.log


def example(entry_id: str, contains: str) -> str:
    """The first line of an entry's match examples that holds `contains`: real text, as the entry cites it."""
    for ex in _KB.entries[entry_id].examples.match:
        for line in ex.text.splitlines():
            if contains in line:
                return line.strip()
    raise AssertionError(f"{entry_id} has no example with {contains!r}")


XID79 = example("gpu-fallen-off-bus", "NVRM: Xid (PCI:0000:44:00): 79")
LAUNCH_FAILURE = example("cuda-unspecified-launch-failure", "CUDA error: unspecified launch failure")
OOM = example("cuda-out-of-memory", "Tried to allocate")


def _log(tmp_path: Path, lines: list[str], name: str = "job.log") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _hardware_job(kernel_stamp: str) -> list[str]:
    return [
        JOB_START,
        f"{kernel_stamp} gpu-17 kernel: {XID79}",
        *(f"[rank{r}]: {LAUNCH_FAILURE}" for r in (12, 13)),
        f"[rank3]: {OOM}",
    ]


def test_hardware_on_one_rank_among_software_errors_means_elsewhere(tmp_path: Path, capsys):
    log = _log(tmp_path, _hardware_job("Nov 29 19:30:01"))
    report = scan(log)
    verdict = report.verdict
    assert verdict is not None and verdict.retry == "elsewhere", verdict
    assert verdict.entry == "gpu-fallen-off-bus" and verdict.blame == "node"
    assert verdict.exclude == ("gpu-17",) and verdict.devices == ("0000:44:00",)
    assert "Xid 79" in verdict.reason
    exclude = tmp_path / "exclude.txt"
    code = main(["scan", str(log), "--exit-by-verdict", "--exclude-file", str(exclude)])
    out = capsys.readouterr().out
    assert code == EXIT_CODES["elsewhere"] == 11
    assert out.splitlines()[0] == "Retry elsewhere: exclude node gpu-17 (Xid 79 on gpu-17)"
    assert exclude.read_text(encoding="utf-8") == "gpu-17\n"


def test_stale_xid_from_before_the_job_is_reported_not_acted_on(tmp_path: Path, capsys):
    log = _log(tmp_path, _hardware_job("Nov 29 18:02:11"))  # half an hour before the job's first line
    report = scan(log)
    verdict = report.verdict
    assert verdict is not None and verdict.retry != "elsewhere", verdict
    assert report.initiating is not None and report.initiating.id == "cuda-unspecified-launch-failure"
    assert len(verdict.stale) == 1 and "before this job" in verdict.stale[0]
    exclude = tmp_path / "exclude.txt"
    code = main(["scan", str(log), "--exit-by-verdict", "--exclude-file", str(exclude), "--json"])
    assert code == EXIT_CODES[verdict.retry]
    assert exclude.read_text(encoding="utf-8") == ""
    import json

    doc = json.loads(capsys.readouterr().out)
    assert doc["verdict"]["retry"] == verdict.retry and doc["verdict"]["stale"] == list(verdict.stale)


def test_software_failure_means_fix_first(tmp_path: Path, capsys):
    log = _log(tmp_path, [JOB_START, f"[rank3]: {OOM}"])
    verdict = scan(log).verdict
    assert verdict is not None and (verdict.retry, verdict.blame, verdict.entry) == ("no", "config", "cuda-out-of-memory")
    assert main(["scan", str(log), "--exit-by-verdict"]) == 12
    assert capsys.readouterr().out.startswith("Do not retry: fix first (cuda-out-of-memory on rank 3)")


def test_unknown_exception_is_13(tmp_path: Path):
    log = _log(tmp_path, [JOB_START, "Traceback (most recent call last):", '  File "train.py", line 3, in <module>',
                          "mymod.WeirdCollectiveFailure: the flux capacitor desynchronised"])
    verdict = scan(log).verdict
    assert verdict is not None and verdict.retry == "unknown" and verdict.entry is None
    assert main(["scan", str(log), "--exit-by-verdict"]) == 13


def test_healthy_logs_give_no_verdict_and_exit_0():
    benign = find_benign_dir(KB)
    assert benign is not None
    for log in sorted(benign.glob("*.log")):
        assert scan(log).verdict is None, log.name
        assert main(["scan", str(log), "--exit-by-verdict"]) == 0, log.name


def test_transient_entry_means_retry_as_is(make_kb, tmp_path: Path):
    transient = variant(('retry: "no"\n  blame: code', 'retry: "yes"\n  blame: fabric'))
    kb = make_kb({"demo-device-mismatch.yaml": transient})
    log = _log(tmp_path, ["RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"])
    assert main(["scan", str(log), "--kb", str(kb), "--exit-by-verdict"]) == 10


def test_without_the_flag_exit_codes_stay_as_documented(tmp_path: Path):
    log = _log(tmp_path, _hardware_job("Nov 29 19:30:01"))
    assert main(["scan", str(log)]) == 1


@pytest.mark.parametrize(
    "text, year, expected",
    [
        ("2026-11-29 19:24:33,302", None, (2026, 11, 29, 19, 24, 33)),
        ("2026-11-29T19:24:33.5+01:00", None, (2026, 11, 29, 18, 24, 33)),
        ("Sun Nov 29 19:30:01 2026", None, (2026, 11, 29, 19, 30, 1)),
        ("Nov 29 19:30:01", 2026, (2026, 11, 29, 19, 30, 1)),
        ("Nov 29 19:30:01", None, None),
        ("not a time", 2026, None),
    ],
)
def test_timestamps(text: str, year: int | None, expected):
    stamp = parse_stamp(text, year)
    assert (stamp.timetuple()[:6] if stamp else None) == expected


def _torchrun_summary(exitcode: int) -> list[str]:
    # torchrun's real ChildFailedError table (captured: torch 2.13.0, CPU), with the root cause's exit code set.
    table = next(ex.text for ex in _KB.entries["torchrun-child-failed"].examples.match if "Root Cause" in ex.text)
    return [JOB_START, *table.replace("exitcode  : 1 (pid: 5787)", f"exitcode  : {exitcode} (pid: 5787)").splitlines()]


@pytest.mark.parametrize(
    "code, entry",
    [(-9, None), (-11, "segmentation-fault"), (-8, "floating-point-exception"), (-7, "dataloader-worker-killed-shm")],
)
def test_an_exit_code_alone_is_read_for_what_it_usually_means(tmp_path: Path, code: int, entry: str | None):
    report = scan(_log(tmp_path, _torchrun_summary(code)))
    verdict = report.verdict
    assert verdict is not None and verdict.retry == "depends", verdict
    assert f"exit code {code} is the only evidence" in verdict.reason
    if entry:
        assert verdict.entry == entry and f"most often {entry}" in verdict.reason


@pytest.mark.parametrize("code", [-6, -7, -8, -9, -11, -15, 137, 139, 143])
def test_the_scan_hint_and_the_verdict_read_one_exit_code_table(tmp_path: Path, code: int):
    from denpex_kb.exitcodes import LAUNCHER_EXITS

    row = LAUNCHER_EXITS[code]
    report = scan(_log(tmp_path, _torchrun_summary(code)))
    hints = [h for h in report.hints if f"exit code {code} ({row.signal})" in h]
    assert hints and row.meaning in hints[0], report.hints
    if row.likely and row.likely in report.index.by_id and report.initiating.id != row.likely:
        assert f"see {row.likely}" in hints[0]
    assert report.verdict is not None and row.short in report.verdict.reason, report.verdict


def test_a_node_failure_excludes_the_node_the_line_names_not_the_one_that_printed_it(tmp_path: Path):
    """srun reports a node failure from another node: `Node failure on <host>` names the node to keep the rerun
    off, while a prefix's host (pdsh, syslog) is only where the line was logged."""
    log = _log(tmp_path, [
        JOB_START,
        "gpu-node-3: srun: error: Node failure on gpu-node-9",
        "gpu-node-3: srun: Job step aborted: Waiting up to 32 seconds for job step to finish.",
        "srun: error: Node failure on jean-zay-iam37",
    ])
    verdict = scan(log).verdict
    assert verdict is not None and verdict.retry == "elsewhere" and verdict.entry == "slurm-node-failure"
    assert verdict.exclude == ("gpu-node-9", "jean-zay-iam37")
    assert "gpu-node-9" in verdict.reason and "gpu-node-3" not in verdict.reason
