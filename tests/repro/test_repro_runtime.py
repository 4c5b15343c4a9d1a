"""Reproductions for the runtime area: run real PyTorch (CPU, gloo) in subprocesses and scan the output."""

import os
import socket
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

from pathlib import Path  # noqa: E402

from denpex_kb import scan as _scan  # noqa: E402
from denpex_kb.compiler import index_from_kb_dir  # noqa: E402

_INDEX = None


def scan(lines):
    """Scan against the entries in kb/ (the packaged bundle may predate them)."""
    global _INDEX
    if _INDEX is None:
        _INDEX = index_from_kb_dir(Path(__file__).resolve().parents[2] / "kb", strict=False)
    return _scan(lines, index=_INDEX)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(args, tmp_path, script, env_extra=None, timeout=60, preexec_fn=None):
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(script))
    env = dict(os.environ, **(env_extra or {}))
    proc = subprocess.run(
        [sys.executable, *args, str(path)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, timeout=timeout, cwd=tmp_path,
        preexec_fn=preexec_fn,
    )
    return proc.stdout.decode("utf-8", "replace").replace("\x00", "")


def _torchrun(tmp_path, script, **kw):
    args = ["-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(_free_port())]
    return _run(args, tmp_path, script, **kw)


# Rank 0 sleeps instead of entering a collective, so that the log holds only the failing rank's own output
# and the launcher's summary (a peer error from gloo on rank 0 would be a separate, collateral finding).
_KILL_RANK1 = """
import os, signal, time, faulthandler, torch.distributed as dist
dist.init_process_group("gloo")
dist.barrier()
if dist.get_rank() == 1:
    {action}
time.sleep(30)
"""


@pytest.mark.repro
def test_rank_sigkill_is_host_oom_killed(tmp_path):
    out = _torchrun(tmp_path, _KILL_RANK1.format(action="os.kill(os.getpid(), signal.SIGKILL)"))
    assert "failed (exitcode: -9)" in out
    assert scan(out.splitlines()).initiating.id == "host-oom-killed"


@pytest.mark.repro
def test_rank_segfault_with_faulthandler(tmp_path):
    out = _torchrun(tmp_path, _KILL_RANK1.format(
        action="faulthandler.enable(); import ctypes; ctypes.string_at(0)"))
    assert "Fatal Python error: Segmentation fault" in out
    assert scan(out.splitlines()).initiating.id == "segmentation-fault"


@pytest.mark.repro
def test_rank_raises_summary_is_collateral(tmp_path):
    out = _torchrun(tmp_path, _KILL_RANK1.format(action="raise RuntimeError('boom on rank 1')"))
    assert "ChildFailedError" in out
    result = scan(out.splitlines())
    # the launcher summary must never be reported as the root cause
    assert result.initiating is None or result.initiating.id != "torchrun-child-failed"


@pytest.mark.repro
def test_port_in_use(tmp_path):
    port = _free_port()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        out = _run([], tmp_path, """
            import torch.distributed as dist
            dist.init_process_group("gloo")
        """, env_extra={"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": "0", "WORLD_SIZE": "1"})
    assert "EADDRINUSE" in out or "Address already in use" in out
    assert scan(out.splitlines()).initiating.id == "rendezvous-port-in-use"


@pytest.mark.repro
def test_tcpstore_timeout(tmp_path):
    out = _run([], tmp_path, """
        import datetime, torch.distributed as dist
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=3))
    """, env_extra={"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()), "RANK": "0", "WORLD_SIZE": "2"})
    assert "clients joined" in out
    assert scan(out.splitlines()).initiating.id == "rendezvous-timeout"


_DL = """
import os, signal, torch
from torch.utils.data import DataLoader, Dataset
class D(Dataset):
    def __len__(self): return 64
    def __getitem__(self, i):
        if i == 10:
            {action}
        return i
if __name__ == "__main__":
    # collate_fn=list keeps batches as plain lists: no tensor file descriptors in flight when the worker dies,
    # which would otherwise race the death report with a ConnectionResetError in the main process.
    for _ in DataLoader(D(), batch_size=2, num_workers=2, collate_fn=list):
        pass
"""


@pytest.mark.repro
def test_dataloader_worker_killed(tmp_path):
    out = _run([], tmp_path, _DL.format(action="os.kill(os.getpid(), signal.SIGKILL)"))
    assert "exited unexpectedly" in out
    assert scan(out.splitlines()).initiating.id == "dataloader-worker-exited"


@pytest.mark.repro
def test_dataloader_worker_bus_error(tmp_path):
    out = _run([], tmp_path, _DL.format(action="os.kill(os.getpid(), signal.SIGBUS)"))
    assert "bus error" in out.lower()
    assert scan(out.splitlines()).initiating.id == "dataloader-worker-killed-shm"


@pytest.mark.repro
def test_too_many_open_files(tmp_path):
    out = _run([], tmp_path, """
        import resource, torch
        from torch.utils.data import DataLoader, Dataset
        class D(Dataset):
            def __len__(self): return 64
            def __getitem__(self, i): return [torch.zeros(4) for _ in range(50)]
        if __name__ == "__main__":
            held = []
            it = iter(DataLoader(D(), batch_size=1, num_workers=2, collate_fn=lambda x: x[0], timeout=10))
            resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))
            for b in it:
                held.append(b)
    """)
    assert "ancdata" in out or "Too many open files" in out
    assert scan(out.splitlines()).initiating.id == "too-many-open-files"


@pytest.mark.repro
def test_cpu_allocation_failure(tmp_path):
    out = _run([], tmp_path, """
        import torch
        torch.empty(2**50, dtype=torch.uint8)
    """)
    assert "DefaultCPUAllocator" in out
    assert scan(out.splitlines()).initiating.id == "host-ram-exhausted"
