"""Reproductions for entries widened by the m1 mining pass (CPU only).

Each test writes a small script to tmp_path, runs the real software in a subprocess, asserts the real text
appears, and checks that `scan` names the expected entry as the initiating failure.
"""

from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")

from _helpers import run_failing, write_script  # noqa: E402

from denpex_kb import scan  # noqa: E402


def _python(tmp_path, body: str, timeout: int = 90) -> str:
    return run_failing([sys.executable, str(write_script(tmp_path, "job.py", body))], tmp_path, timeout=timeout)


def _root(output: str) -> str | None:
    report = scan(output.splitlines())
    return report.initiating.id if report.initiating else None


@pytest.mark.repro
def test_dataloader_fd_limit_prints_errno_24_shared_memory_form(tmp_path):
    output = _python(
        tmp_path,
        """
        import resource, torch
        from torch.utils.data import DataLoader, Dataset
        resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))
        class D(Dataset):
            def __len__(self): return 64
            def __getitem__(self, i): return [torch.zeros(4) for _ in range(200)]
        kept = []
        for b in DataLoader(D(), batch_size=None, num_workers=2, timeout=15):
            kept.append(b)
        """,
    )
    assert "in read-write mode: Too many open files (24)" in output
    assert _root(output) == "too-many-open-files"


@pytest.mark.repro
def test_dataloader_worker_sigfpe_is_worker_exited(tmp_path):
    output = _python(
        tmp_path,
        """
        import os, signal, torch
        from torch.utils.data import DataLoader, Dataset
        class D(Dataset):
            def __len__(self): return 8
            def __getitem__(self, i):
                os.kill(os.getpid(), signal.SIGFPE)
                return torch.zeros(2)
        for b in DataLoader(D(), num_workers=1):
            pass
        """,
    )
    assert "ERROR: Unexpected floating-point exception encountered in worker." in output
    assert "is killed by signal: Floating point exception" in output
    assert _root(output) == "dataloader-worker-exited"


@pytest.mark.repro
def test_full_dev_shm_prints_fallocate_wording(tmp_path):
    """A 4 MB /dev/shm in a private mount namespace (needs root and unshare; skipped otherwise)."""
    import shutil
    import subprocess

    from denpex_kb import match

    if shutil.which("unshare") is None:
        pytest.skip("unshare not available")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("cannot create a mount namespace here")
    script = write_script(
        tmp_path,
        "job.py",
        """
        import torch
        from torch.utils.data import DataLoader, Dataset
        class D(Dataset):
            def __len__(self): return 8
            def __getitem__(self, i): return torch.zeros(4_000_000)
        for b in DataLoader(D(), num_workers=2, timeout=20):
            pass
        """,
    )
    shell = f"mount -t tmpfs -o size=4m tmpfs /dev/shm && exec {sys.executable} {script}"
    output = run_failing(["unshare", "-m", "sh", "-c", shell], tmp_path, timeout=90)
    line = next(x for x in output.splitlines() if "unable to allocate shared memory(shm) for file" in x)
    assert line.endswith("No space left on device (28)")
    assert match(line)[0].id == "dataloader-worker-killed-shm"
