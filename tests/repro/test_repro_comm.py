"""Reproduce collective failures on CPU with torchrun and the Gloo backend, and check that scan names them."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

from denpex_kb import scan  # noqa: E402

TIMEOUT_SCRIPT = """
import datetime, time, torch, torch.distributed as dist
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=5))
t = torch.ones(4)
if dist.get_rank() == 1:
    time.sleep(15)
dist.all_reduce(t)
"""

MISMATCH_SCRIPT = """
import datetime, torch, torch.distributed as dist
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=10))
t = torch.ones(4)
if dist.get_rank() == 0:
    dist.all_reduce(t)
else:
    dist.broadcast(t, src=0)
"""

SKIPPED_COLLECTIVE_SCRIPT = """
import datetime, time, torch, torch.distributed as dist
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=5))
t = torch.ones(4)
if dist.get_rank() == 0:
    dist.all_reduce(t)
else:
    time.sleep(12)
"""


def _torchrun(tmp_path, source: str, env_extra: dict[str, str] | None = None) -> str:
    import os

    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(source))
    env = dict(os.environ, OMP_NUM_THREADS="1", **(env_extra or {}))
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=90,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode != 0, proc.stdout
    return proc.stdout


@pytest.mark.repro
def test_gloo_collective_timeout(tmp_path):
    out = _torchrun(tmp_path, TIMEOUT_SCRIPT)
    assert "Timed out waiting" in out
    assert scan(out.splitlines()).initiating.id == "nccl-watchdog-timeout"


@pytest.mark.repro
def test_collective_mismatch_detail(tmp_path):
    out = _torchrun(tmp_path, MISMATCH_SCRIPT, {"TORCH_DISTRIBUTED_DEBUG": "DETAIL"})
    assert "Detected mismatch between collectives on ranks" in out
    assert scan(out.splitlines()).initiating.id == "collective-mismatch-desync"


@pytest.mark.repro
def test_skipped_collective_detail(tmp_path):
    out = _torchrun(tmp_path, SKIPPED_COLLECTIVE_SCRIPT, {"TORCH_DISTRIBUTED_DEBUG": "DETAIL"})
    assert "failed to pass monitoredBarrier" in out
    assert scan(out.splitlines()).initiating.id == "collective-mismatch-desync"
