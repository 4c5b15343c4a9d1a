"""Reproductions of the checkpoint failures: state-dict mismatches, weights-only refusals, corrupt files, full disk.

Each test runs a small script in a subprocess (plain Python or torchrun with gloo on the CPU), captures its
combined output and checks that `scan` names the expected entry as the root cause.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from _helpers import run_failing, torchrun_args, write_script  # noqa: E402

from denpex_kb import scan  # noqa: E402

_run = run_failing


_script = write_script


def _torchrun(script) -> list[str]:
    return torchrun_args(script)


@pytest.mark.repro
def test_resized_layer_is_state_dict_size_mismatch(tmp_path):
    script = _script(
        tmp_path,
        "resume.py",
        """
        import torch, torch.nn as nn, torch.distributed as dist
        dist.init_process_group("gloo")
        model = nn.Linear(8, 4)
        model.load_state_dict(nn.Linear(8, 6).state_dict())
        """,
    )
    output = _run(_torchrun(script), tmp_path)
    assert "size mismatch for weight" in output
    assert scan(output.splitlines()).initiating.id == "state-dict-size-mismatch"


@pytest.mark.repro
def test_ddp_prefix_is_missing_unexpected_keys(tmp_path):
    script = _script(
        tmp_path,
        "resume.py",
        """
        import os, torch, torch.nn as nn, torch.distributed as dist
        dist.init_process_group("gloo")
        ddp = nn.parallel.DistributedDataParallel(nn.Linear(8, 4))
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ddp.pt")
        if dist.get_rank() == 0:
            torch.save(ddp.state_dict(), path)
        dist.barrier()
        nn.Linear(8, 4).load_state_dict(torch.load(path))
        """,
    )
    output = _run(_torchrun(script), tmp_path)
    assert 'Unexpected key(s) in state_dict: "module.weight"' in output
    assert scan(output.splitlines()).initiating.id == "state-dict-missing-unexpected-keys"


@pytest.mark.repro
def test_compiled_model_prefix_is_missing_unexpected_keys(tmp_path):
    script = _script(
        tmp_path,
        "load.py",
        """
        import torch, torch.nn as nn
        model = nn.Sequential(nn.Linear(10, 20), nn.Linear(20, 5))
        saved = torch.compile(model).state_dict()   # keys carry the _orig_mod. prefix
        nn.Sequential(nn.Linear(10, 20), nn.Linear(20, 5)).load_state_dict(saved)
        """,
    )
    output = _run([sys.executable, str(script)], tmp_path)
    assert "_orig_mod.0.weight" in output
    assert scan(output.splitlines()).initiating.id == "state-dict-missing-unexpected-keys"


@pytest.mark.repro
def test_namespace_in_checkpoint_is_weights_only_refusal(tmp_path):
    script = _script(
        tmp_path,
        "load.py",
        """
        import argparse, torch
        torch.save({"args": argparse.Namespace(lr=0.1), "w": torch.zeros(2)}, "ckpt.pt")
        torch.load("ckpt.pt")   # weights_only defaults to True since torch 2.6
        """,
    )
    output = _run([sys.executable, str(script)], tmp_path)
    if "Weights only load failed" not in output:
        pytest.skip("this torch does not default to weights_only=True")
    assert scan(output.splitlines()).initiating.id == "torch-load-weights-only"


@pytest.mark.repro
@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_truncated_file_is_corrupt_checkpoint(tmp_path, legacy):
    script = _script(
        tmp_path,
        "load.py",
        f"""
        import torch
        torch.save({{"w": torch.randn(1000, 100)}}, "good.pt", _use_new_zipfile_serialization={not legacy})
        data = open("good.pt", "rb").read()
        open("ckpt.pt", "wb").write(data[: len(data) // 2])   # a save cut short
        torch.load("ckpt.pt")
        """,
    )
    output = _run([sys.executable, str(script)], tmp_path)
    assert scan(output.splitlines()).initiating.id == "checkpoint-corrupt-or-truncated"


@pytest.mark.repro
def test_lfs_pointer_is_corrupt_checkpoint(tmp_path):
    script = _script(
        tmp_path,
        "load.py",
        """
        import torch
        open("ckpt.pt", "w").write("version https://git-lfs.github.com/spec/v1\\noid sha256:0\\nsize 1\\n")
        torch.load("ckpt.pt")
        """,
    )
    output = _run([sys.executable, str(script)], tmp_path)
    assert scan(output.splitlines()).initiating.id == "checkpoint-corrupt-or-truncated"


@pytest.fixture()
def tiny_tmpfs(tmp_path):
    """A 1 MiB tmpfs; needs root and the right to mount (skipped otherwise)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


@pytest.mark.repro
@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_save_into_full_disk_is_disk_full(tmp_path, tiny_tmpfs, legacy):
    script = _script(
        tmp_path,
        "save.py",
        f"""
        import sys, torch
        torch.save({{"w": torch.randn(1000, 1000)}}, sys.argv[1] + "/ckpt.pt",
                   _use_new_zipfile_serialization={not legacy})
        """,
    )
    output = _run([sys.executable, str(script), str(tiny_tmpfs)], tmp_path)
    assert scan(output.splitlines()).initiating.id == "disk-full-checkpoint-write"
