"""Reproductions of launch and data-loading failures on CPU (distributed env, rendezvous, DataLoader, devices).

Each test writes a small script to tmp_path, runs the real software in a subprocess (plain Python, or
torchrun with gloo ranks), asserts the real text appears, and checks that `scan` names the expected entry as
the root cause.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from _helpers import run_failing, torchrun_args, write_script  # noqa: E402

from denpex_kb import scan  # noqa: E402

_LAUNCHER_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _LAUNCHER_VARS}
    env["OMP_NUM_THREADS"] = "1"
    env.update(extra)
    return env


def _python(tmp_path, body: str, timeout: int = 60, **env: str) -> str:
    """Run a script with plain python and without any launcher variables; require that it fails."""
    script = write_script(tmp_path, "job.py", body)
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, timeout=timeout, env=_clean_env(**env),
    )
    assert proc.returncode != 0, proc.stdout
    return proc.stdout


def _torchrun(tmp_path, body: str, env: dict[str, str] | None = None, timeout: int = 90) -> str:
    script = write_script(tmp_path, "job.py", body)
    return run_failing(torchrun_args(script), tmp_path, timeout=timeout, env=env)


def _root(output: str) -> str | None:
    report = scan(output.splitlines())
    return report.initiating.id if report.initiating else None


@pytest.mark.repro
def test_init_process_group_under_plain_python_is_distributed_env_missing(tmp_path):
    output = _python(
        tmp_path,
        """
        import torch.distributed as dist
        dist.init_process_group("gloo")
        """,
    )
    assert "environment variable RANK expected, but not set" in output
    assert _root(output) == "distributed-env-missing"


@pytest.mark.repro
def test_rank_and_world_size_without_master_port_is_distributed_env_missing(tmp_path):
    output = _python(
        tmp_path,
        """
        import torch.distributed as dist
        dist.init_process_group("gloo", rank=0, world_size=1)
        """,
        MASTER_ADDR="127.0.0.1",
    )
    assert "environment variable MASTER_PORT expected, but not set" in output
    assert _root(output) == "distributed-env-missing"


@pytest.mark.repro
def test_slow_worker_with_loader_timeout_is_dataloader_timeout(tmp_path):
    output = _python(
        tmp_path,
        """
        import time, torch
        from torch.utils.data import DataLoader, Dataset
        class Slow(Dataset):
            def __len__(self): return 4
            def __getitem__(self, i):
                time.sleep(5); return torch.zeros(2)
        for batch in DataLoader(Slow(), batch_size=2, num_workers=1, timeout=1):
            pass
        """,
    )
    assert "DataLoader timed out after 1 seconds" in output
    assert _root(output) == "dataloader-timeout"


@pytest.mark.repro
def test_slow_worker_under_torchrun_is_dataloader_timeout(tmp_path):
    output = _torchrun(
        tmp_path,
        """
        import time, torch, torch.distributed as dist
        from torch.utils.data import DataLoader, Dataset
        dist.init_process_group("gloo")
        class Slow(Dataset):
            def __len__(self): return 8
            def __getitem__(self, i):
                time.sleep(5); return torch.zeros(2)
        for batch in DataLoader(Slow(), batch_size=2, num_workers=1, timeout=1.5):
            pass
        """,
    )
    assert "RuntimeError: DataLoader timed out after 1.5 seconds" in output
    assert _root(output) == "dataloader-timeout"


@pytest.mark.repro
def test_cpu_tensor_on_cuda_only_group_is_pg_no_backend_for_device(tmp_path):
    output = _torchrun(
        tmp_path,
        """
        import torch, torch.distributed as dist
        dist.init_process_group("cuda:gloo")   # a backend for CUDA tensors only, like backend="nccl"
        dist.all_reduce(torch.ones(2))         # a CPU tensor
        """,
    )
    assert "No backend type associated with device type cpu" in output
    assert _root(output) == "pg-no-backend-for-device"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.repro
def test_restart_after_peer_agent_finished_is_rendezvous_closed(tmp_path):
    # Agent B hosts the c10d store and may restart once; agent A's worker fails with no restarts left, so A's
    # run ends and closes the rendezvous. When B's worker fails and B tries to restart, the rendezvous is closed.
    a = write_script(tmp_path, "a.py", "import sys, time\ntime.sleep(2)\nsys.exit(3)\n")
    b = write_script(
        tmp_path, "b.py",
        "import os, sys, time\n"
        "time.sleep(10 if os.environ.get('TORCHELASTIC_RESTART_COUNT') == '0' else 1)\n"
        "sys.exit(4)\n",
    )
    common = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1",
              "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{_free_port()}", "--rdzv-id", "n2job"]
    env = _clean_env()
    agent_b = subprocess.Popen([*common, "--max-restarts", "1", str(b)], cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, env=env)
    try:
        import time

        time.sleep(4)  # let B bind the store first
        subprocess.run([*common, "--max-restarts", "0", str(a)], cwd=tmp_path, stdout=subprocess.DEVNULL,
                       stderr=subprocess.STDOUT, timeout=120, env=env)
        output, _ = agent_b.communicate(timeout=120)
    finally:
        if agent_b.poll() is None:
            agent_b.kill()
    assert agent_b.returncode != 0
    assert "torch.distributed.elastic.rendezvous.api.RendezvousClosedError" in output
    report = scan(output.splitlines())
    # The closed rendezvous is fallout: the root cause on this node is the worker that exited first.
    assert report.initiating is not None and report.initiating.id == "torchrun-child-failed"
    assert "rendezvous-closed" in [f.id for f in report.collateral]


@pytest.mark.repro
def test_unresolvable_master_addr_is_rendezvous_address_unavailable(tmp_path):
    output = _python(
        tmp_path,
        """
        import datetime, torch.distributed as dist
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=8))
        """,
        timeout=90, RANK="1", WORLD_SIZE="2", MASTER_ADDR="nosuchhost.invalid", MASTER_PORT="29651",
    )
    assert "network addresses of (nosuchhost.invalid, 29651) cannot be retrieved (gai error" in output
    # The connect timeout that ends the run is fallout of the name that never resolved.
    assert "The client socket has timed out" in output
    assert _root(output) == "rendezvous-address-unavailable"


@pytest.mark.repro
def test_padding_with_tokenizer_without_pad_token_is_tokenizer_missing_pad_token(tmp_path):
    pytest.importorskip("transformers")
    output = _python(
        tmp_path,
        """
        from tokenizers import Tokenizer, models, pre_tokenizers
        from transformers import PreTrainedTokenizerFast
        raw = Tokenizer(models.WordLevel({"a": 0, "b": 1, "<unk>": 2, "</s>": 3}, unk_token="<unk>"))
        raw.pre_tokenizer = pre_tokenizers.Whitespace()
        tok = PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="<unk>", eos_token="</s>")  # no pad token
        tok(["a", "a b"], padding=True)
        """,
    )
    assert "Asking to pad but the tokenizer does not have a padding token" in output
    assert _root(output) == "tokenizer-missing-pad-token"
