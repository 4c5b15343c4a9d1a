"""Reproductions of the dsm helper's entries on CPU, checked against denpex_kb.scan.

Needs deepspeed importable by the test interpreter for the DeepSpeed case; skipped otherwise. DeepSpeed's CPU
accelerator JIT-builds its shared-memory comm op on first use, later runs reuse ~/.cache/torch_extensions.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

import denpex_kb  # noqa: E402


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _torchrun(tmp_path, body: str, nproc: int = 2) -> str:
    script = tmp_path / "repro.py"
    script.write_text(textwrap.dedent(body))
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--master-port",
         str(_free_port()), str(script)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )
    assert proc.returncode != 0, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


@pytest.mark.repro
def test_repro_deepspeed_no_sync_zero2(tmp_path):
    pytest.importorskip("deepspeed")
    # ZeRO-2 in fp32: no fp16, so the CPU accelerator's fp16 gate is not involved.
    output = _torchrun(tmp_path, """
        import torch, deepspeed
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 1))
        cfg = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
               "optimizer": {"type": "Adam", "params": {"lr": 0.01, "torch_adam": True}},
               "zero_optimization": {"stage": 2}}
        engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=cfg)
        with engine.no_sync():
            loss = engine(torch.randn(2, 8)).pow(2).mean()
            engine.backward(loss)
    """)
    assert "AssertionError: no_sync context manager is incompatible with gradient partitioning logic of ZeRO stage 2" in output
    report = denpex_kb.scan(output.splitlines())
    assert report.initiating is not None, output[-3000:]
    assert report.initiating.id == "deepspeed-no-sync-zero", output[-3000:]
