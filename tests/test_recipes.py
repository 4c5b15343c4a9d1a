"""The shipped recipes run for real: bash scripts with stand-ins for the tools a cluster has (scontrol, torchrun),
and the YAML recipes parsed and checked against the verdict's exit codes, their run steps executed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML
from test_verdict import JOB_START, OOM, XID79

from conftest import variant
from denpex_kb.commands.recipe import recipes
from denpex_kb.verdict import EXIT_CODES

BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="bash is needed to run the recipes")

HARDWARE_LOG = [JOB_START, f"Nov 29 19:30:01 gpu-17 kernel: {XID79}", f"[rank3]: {OOM}"]
SOFTWARE_LOG = [JOB_START, f"[rank3]: {OOM}"]


def _tools(tmp_path: Path, log_lines: list[str], exit_code: int = 1) -> Path:
    """A bin/ with a `torchrun` that prints the given lines and fails, and an `scontrol` that records its calls."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (tmp_path / "job-output.txt").write_text("\n".join(log_lines) + "\n", encoding="utf-8")
    torchrun = bin_dir / "torchrun"
    torchrun.write_text(f'#!/bin/sh\necho run >> "{tmp_path}/runs"\ncat "{tmp_path}/job-output.txt"\nexit {exit_code}\n')
    scontrol = bin_dir / "scontrol"
    scontrol.write_text(f'#!/bin/sh\necho "$@" >> "{tmp_path}/scontrol-calls"\n')
    for tool in (torchrun, scontrol):
        tool.chmod(0o755)
    return bin_dir


def _env(bin_dir: Path, **extra: str) -> dict[str, str]:
    path = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return {**os.environ, "PATH": path, **extra}


def _recipe(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.write_text(recipes()[name], encoding="utf-8")
    path.chmod(0o755)
    return path


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def test_slurm_requeue_excludes_the_bad_node(tmp_path: Path):
    script = _recipe(tmp_path, "slurm-requeue.sh")
    env = _env(_tools(tmp_path, HARDWARE_LOG), SLURM_JOB_ID="4711", SLURM_RESTART_COUNT="0")
    proc = subprocess.run([BASH, str(script), str(tmp_path / "train.log"), "--", "torchrun", "train.py"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr  # the step's own status
    assert _lines(tmp_path / "scontrol-calls") == ["update JobId=4711 ExcNodeList=gpu-17", "requeue 4711"]
    assert "Retry elsewhere: exclude node gpu-17" in proc.stderr


def test_slurm_requeue_leaves_a_code_failure_alone(tmp_path: Path):
    script = _recipe(tmp_path, "slurm-requeue.sh")
    env = _env(_tools(tmp_path, SOFTWARE_LOG), SLURM_JOB_ID="4711")
    proc = subprocess.run([BASH, str(script), str(tmp_path / "train.log"), "--", "torchrun", "train.py"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert _lines(tmp_path / "scontrol-calls") == []
    assert "Do not retry: fix first" in proc.stderr


def test_slurm_requeue_stops_after_the_limit(tmp_path: Path):
    script = _recipe(tmp_path, "slurm-requeue.sh")
    env = _env(_tools(tmp_path, HARDWARE_LOG), SLURM_JOB_ID="4711", SLURM_RESTART_COUNT="3")
    subprocess.run([BASH, str(script), str(tmp_path / "train.log"), "--", "torchrun", "train.py"],
                   env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert _lines(tmp_path / "scontrol-calls") == []


def test_retry_loop_reruns_transient_failures_only(tmp_path: Path, make_kb):
    # A knowledge base whose one entry is transient (retry: yes), compiled into a bundle the script's scan uses.
    transient = variant(('retry: "no"\n  blame: code', 'retry: "yes"\n  blame: fabric'))
    kb = make_kb({"demo-device-mismatch.yaml": transient})
    bundle = tmp_path / "bundle"
    subprocess.run([sys.executable, "-m", "denpex_kb", "compile", "--kb", str(kb), "--out", str(bundle)],
                   check=True, capture_output=True)
    line = "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
    script = _recipe(tmp_path, "retry-loop.sh")
    env = _env(_tools(tmp_path, [line]), DENPEX_KB_BUNDLE=str(bundle))
    proc = subprocess.run([BASH, str(script), "-n", "3", str(tmp_path / "train.log"), "--", "torchrun", "train.py"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert proc.returncode == EXIT_CODES["yes"], proc.stderr
    assert len(_lines(tmp_path / "runs")) == 3  # rerun until the attempts ran out


def test_retry_loop_stops_on_a_code_failure(tmp_path: Path):
    script = _recipe(tmp_path, "retry-loop.sh")
    proc = subprocess.run([BASH, str(script), str(tmp_path / "train.log"), "--", "torchrun", "train.py"],
                          env=_env(_tools(tmp_path, SOFTWARE_LOG)), cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == EXIT_CODES["no"] == 12
    assert len(_lines(tmp_path / "runs")) == 1


def _run_step(tmp_path: Path, script: str, log_lines: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([BASH, "-c", script], env=_env(_tools(tmp_path, log_lines)), cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)


def test_skypilot_recovers_exactly_the_retry_codes(tmp_path: Path):
    doc = YAML(typ="safe").load(recipes()["skypilot-job.yaml"])
    recovery = doc["resources"]["job_recovery"]
    assert recovery["recover_on_exit_codes"] == [EXIT_CODES["yes"], EXIT_CODES["elsewhere"]]
    assert recovery["max_restarts_on_errors"] == 0  # fix-first and unknown failures end the job
    assert _run_step(tmp_path, doc["run"], HARDWARE_LOG).returncode == EXIT_CODES["elsewhere"]
    assert _run_step(tmp_path, doc["run"], SOFTWARE_LOG).returncode == EXIT_CODES["no"]


def test_kubernetes_pod_failure_policy(tmp_path: Path):
    doc = YAML(typ="safe").load(recipes()["kubernetes-job.yaml"])
    assert (doc["apiVersion"], doc["kind"]) == ("batch/v1", "Job")
    pod = doc["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"  # the API rejects podFailurePolicy otherwise
    container = pod["containers"][0]
    rules = doc["spec"]["podFailurePolicy"]["rules"]
    for rule in rules:
        assert rule["action"] in {"FailJob", "Ignore", "Count", "FailIndex"}
        codes = rule["onExitCodes"]
        assert codes["containerName"] == container["name"] and codes["operator"] in {"In", "NotIn"}
        assert all(isinstance(v, int) and 0 < v <= 255 for v in codes["values"])
    by_action = {r["action"]: set(r["onExitCodes"]["values"]) for r in rules}
    assert by_action["FailJob"] == {EXIT_CODES["no"], EXIT_CODES["unknown"]}
    assert by_action["Count"] == {EXIT_CODES["yes"], EXIT_CODES["elsewhere"]}
    step = container["args"][0].replace("/dev/termination-log", str(tmp_path / "termination-log"))
    proc = _run_step(tmp_path, step, HARDWARE_LOG)
    assert proc.returncode == EXIT_CODES["elsewhere"]
    assert (tmp_path / "termination-log").read_text().startswith("Retry elsewhere: exclude node gpu-17")


def _epilog(tmp_path: Path, files: dict[str, list[str]], scontrol: str = "", **slurm: str) -> list[dict]:
    """Run the epilog as slurmctld would: the job's environment, output files written, no PATH but ours."""
    script = _recipe(tmp_path, "slurm-epilog.sh")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "scontrol"
    fake.write_text(f"#!/bin/sh\n{scontrol or 'exit 1'}\n")
    fake.chmod(0o755)
    for name, lines in files.items():
        (tmp_path / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "fleet" / "jobs.jsonl"
    env = _env(bin_dir, DENPEX_EPILOG_OUT=str(out), DENPEX_KB=shutil.which("denpex-kb", path=_env(bin_dir)["PATH"]) or "denpex-kb",
               **slurm)
    proc = subprocess.run([BASH, str(script)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr  # an epilog that fails drains the node
    return [json.loads(line) for line in _lines(out)]


def test_slurm_epilog_appends_one_record_per_job(tmp_path: Path):
    out, err = str(tmp_path / "slurm-4711.out"), str(tmp_path / "slurm-4711.err")
    (row,) = _epilog(tmp_path, {"slurm-4711.out": [JOB_START], "slurm-4711.err": HARDWARE_LOG[1:]},
                     SLURM_JOB_ID="4711", SLURM_JOB_STDOUT=out, SLURM_JOB_STDERR=err, SLURM_JOB_EXIT_CODE2="1:0",
                     SLURM_SCRIPT_CONTEXT="epilog_slurmctld")
    assert row["job"] == "4711" and row["files"] == sorted([out, err])
    assert row["initiating_id"] == "gpu-fallen-off-bus" and row["verdict_retry"] == "elsewhere"
    (second,) = _epilog(tmp_path, {"slurm-4712.out": SOFTWARE_LOG}, SLURM_JOB_ID="4712",
                        SLURM_JOB_STDOUT=str(tmp_path / "slurm-4712.out"), SLURM_JOB_STDERR=str(tmp_path / "slurm-4712.out"))[1:]
    assert second["job"] == "4712" and second["files"] == [str(tmp_path / "slurm-4712.out")]  # one file, once
    assert second["initiating_id"] == "cuda-out-of-memory"


def test_slurm_epilog_before_21_08_asks_scontrol(tmp_path: Path):
    log = tmp_path / "train-99.log"
    shown = f"echo 'JobId=99 JobName=train'; echo '   StdErr={log} StdIn=/dev/null StdOut={log}'"
    (row,) = _epilog(tmp_path, {"train-99.log": SOFTWARE_LOG}, scontrol=shown, SLURM_JOB_ID="99")
    assert (row["job"], row["files"], row["initiating_id"]) == ("99", [str(log)], "cuda-out-of-memory")


def test_slurm_epilog_on_compute_nodes_writes_once(tmp_path: Path):
    log = str(tmp_path / "slurm-5.out")
    hosts = "echo gpu-01; echo gpu-02"
    common = {"SLURM_JOB_ID": "5", "SLURM_JOB_STDOUT": log, "SLURM_SCRIPT_CONTEXT": "epilog_slurmd",
              "SLURM_JOB_NODELIST": "gpu-[01-02]"}
    assert _epilog(tmp_path, {"slurm-5.out": SOFTWARE_LOG}, scontrol=hosts, SLURMD_NODENAME="gpu-02", **common) == []
    (row,) = _epilog(tmp_path, {"slurm-5.out": SOFTWARE_LOG}, scontrol=hosts, SLURMD_NODENAME="gpu-01", **common)
    assert row["job"] == "5"


def test_slurm_epilog_can_skip_successful_jobs(tmp_path: Path):
    log = str(tmp_path / "slurm-6.out")
    job = {"SLURM_JOB_ID": "6", "SLURM_JOB_STDOUT": log, "SLURM_JOB_EXIT_CODE2": "0:0"}
    assert _epilog(tmp_path, {"slurm-6.out": [JOB_START]}, DENPEX_EPILOG_FAILED_ONLY="1", **job) == []
    (row,) = _epilog(tmp_path, {"slurm-6.out": [JOB_START]}, **job)
    assert row["job"] == "6" and row["initiating_id"] is None  # a healthy job is one record too


def test_every_recipe_is_tested():
    assert set(recipes()) == {"slurm-requeue.sh", "slurm-epilog.sh", "retry-loop.sh", "skypilot-job.yaml",
                              "kubernetes-job.yaml"}
