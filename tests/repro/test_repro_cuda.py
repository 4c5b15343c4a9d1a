"""Reproductions of the CUDA-area failures that a CPU-only PyTorch can show for real.

A CPU build raises PyTorch's own "Torch not compiled with CUDA enabled" for any CUDA request, and autograd's
anomaly mode and clip_grad_norm_'s non-finite check run the same on the CPU as on a GPU. Each test runs a small
script in a subprocess (plain Python, or torchrun on the CPU) and checks that `scan` names the
expected entry as the root cause.
"""

from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")

from _helpers import run_failing, torchrun_args, write_script  # noqa: E402

from denpex_kb import scan  # noqa: E402

_run = run_failing


def _torchrun(script) -> list[str]:
    return torchrun_args(script, tee=True)


_write = write_script


@pytest.mark.repro
def test_cpu_build_asked_for_cuda_is_cuda_unavailable(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("needs a PyTorch without a usable CUDA device")
    script = _write(
        tmp_path,
        "to_gpu.py",
        """
        import os, torch
        rank = int(os.environ.get("RANK", "0"))
        model = torch.nn.Linear(4, 4)
        model.to(f"cuda:{rank}")
        """,
    )
    output = _run(_torchrun(script), tmp_path)
    assert "Torch not compiled with CUDA enabled" in output or "No CUDA GPUs are available" in output
    assert scan(output.splitlines()).initiating.id == "cuda-unavailable"


@pytest.mark.repro
def test_anomaly_mode_nan_in_backward_is_loss_nan(tmp_path):
    script = _write(
        tmp_path,
        "anomaly.py",
        """
        import torch
        torch.autograd.set_detect_anomaly(True)
        w = torch.nn.Parameter(torch.tensor([0.0, 1.0, 4.0]))
        mask = torch.tensor([0.0, 1.0, 1.0])
        loss = (torch.sqrt(w) * mask).sum()   # masked entry: 0 * d sqrt(w)/dw at w=0 (inf) -> nan
        loss.backward()
        """,
    )
    output = _run([sys.executable, str(script)], tmp_path)
    assert "returned nan values" in output
    assert scan(output.splitlines()).initiating.id == "loss-nan-or-inf"


@pytest.mark.repro
def test_nonfinite_grad_norm_in_clipping_is_loss_nan(tmp_path):
    script = _write(
        tmp_path,
        "train.py",
        """
        import torch
        torch.manual_seed(0)
        model = torch.nn.Linear(8, 1)
        opt = torch.optim.SGD(model.parameters(), lr=1e30)   # diverges within a few steps
        x, y = torch.randn(16, 8), torch.randn(16, 1)
        for step in range(50):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1e30, error_if_nonfinite=True)
            opt.step()
            print(f"step {step} loss {loss.item():.4e}", flush=True)
        """,
    )
    output = _run([sys.executable, str(script)], tmp_path)
    assert "is non-finite, so it cannot be clipped" in output
    assert scan(output.splitlines()).initiating.id == "loss-nan-or-inf"
