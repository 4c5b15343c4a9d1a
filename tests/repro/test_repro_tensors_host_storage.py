"""Reproductions for wordings added while mining tensor, host-memory and storage entries (CPU only).

Each test runs the real software in a subprocess and checks both the printed text and that `scan` names the
entry as the initiating failure.
"""

from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")

from _helpers import run_failing, write_script  # noqa: E402

from denpex_kb import scan  # noqa: E402


def _python(tmp_path, body: str) -> str:
    return run_failing([sys.executable, str(write_script(tmp_path, "job.py", body))], tmp_path, timeout=90)


def _root(output: str) -> str | None:
    report = scan(output.splitlines())
    return report.initiating.id if report.initiating else None


@pytest.mark.repro
def test_sdpa_with_mixed_query_and_kv_dtypes_is_dtype_mismatch(tmp_path):
    output = _python(
        tmp_path,
        """
        import torch, torch.nn.functional as F
        q = torch.randn(1, 2, 4, 8)
        kv = torch.randn(1, 2, 4, 8, dtype=torch.float16)
        F.scaled_dot_product_attention(q, kv, kv)
        """,
    )
    assert "Expected query, key, and value to have the same dtype" in output
    assert _root(output) == "tensor-dtype-mismatch"


@pytest.mark.repro
def test_index_put_of_float64_rows_is_dtype_mismatch(tmp_path):
    output = _python(
        tmp_path,
        """
        import torch
        a = torch.zeros(3, 3)
        a[torch.tensor([0, 1])] = torch.ones(2, 3, dtype=torch.float64)
        """,
    )
    assert "Index put requires the source and destination dtypes match" in output
    assert _root(output) == "tensor-dtype-mismatch"


@pytest.mark.repro
def test_five_dim_batch_into_conv2d_is_shape_mismatch(tmp_path):
    output = _python(
        tmp_path,
        """
        import torch
        torch.nn.Conv2d(3, 8, 3)(torch.randn(2, 1, 3, 32, 32))
        """,
    )
    assert "Expected 3D (unbatched) or 4D (batched) input to conv2d" in output
    assert _root(output) == "tensor-shape-mismatch"


@pytest.mark.repro
def test_lstm_fed_wrong_feature_size_is_shape_mismatch(tmp_path):
    output = _python(
        tmp_path,
        """
        import torch
        torch.nn.LSTM(10, 20)(torch.randn(5, 3, 12))
        """,
    )
    assert "input.size(-1) must be equal to input_size. Expected 10, got 12" in output
    assert _root(output) == "tensor-shape-mismatch"


@pytest.mark.repro
def test_boolean_mask_of_wrong_shape_is_shape_mismatch(tmp_path):
    output = _python(
        tmp_path,
        """
        import torch
        torch.randn(2, 4)[torch.ones(2, 3, dtype=torch.bool)]
        """,
    )
    assert "The shape of the mask [2, 3] at index 1 does not match" in output
    assert _root(output) == "tensor-shape-mismatch"


@pytest.mark.repro
def test_segmentation_target_with_extra_dim_is_shape_mismatch(tmp_path):
    output = _python(
        tmp_path,
        """
        import torch, torch.nn.functional as F
        F.cross_entropy(torch.randn(2, 5, 3, 3), torch.zeros(2, 3, 3, 4, dtype=torch.long))
        """,
    )
    assert "only batches of spatial targets supported" in output
    assert _root(output) == "tensor-shape-mismatch"


@pytest.mark.repro
def test_truncated_legacy_checkpoint_is_corrupt_checkpoint(tmp_path):
    output = _python(
        tmp_path,
        """
        import torch
        torch.save({"w": torch.randn(1000)}, "ckpt.pt", _use_new_zipfile_serialization=False)
        data = open("ckpt.pt", "rb").read()
        open("ckpt.pt", "wb").write(data[:200])
        torch.load("ckpt.pt", weights_only=False)
        """,
    )
    assert "UnpicklingError: pickle data was truncated" in output
    assert _root(output) == "checkpoint-corrupt-or-truncated"


@pytest.mark.repro
def test_spawned_rank_killed_by_sigkill_is_host_oom_killed(tmp_path):
    output = _python(
        tmp_path,
        """
        import os, signal
        import torch.multiprocessing as mp

        def worker(rank):
            os.kill(os.getpid(), signal.SIGKILL)  # what the kernel OOM killer does

        if __name__ == "__main__":
            mp.spawn(worker, nprocs=1)
        """,
    )
    assert "process 0 terminated with signal SIGKILL" in output
    assert _root(output) == "host-oom-killed"
