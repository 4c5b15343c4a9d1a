"""Reproductions for Gloo and TCPStore connection failures: real PyTorch (CPU, gloo) in subprocesses, then scan."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

from denpex_kb import scan  # noqa: E402

# A driver that hosts the TCPStore itself and starts two ranks as plain processes (no torchrun, so that a
# rank that exits does not get its peer killed before the peer prints its error).
_DRIVER = """
import datetime, os, subprocess, sys, threading, time
import torch, torch.distributed as dist
mode = sys.argv[1]
if len(sys.argv) == 2:
    store = dist.TCPStore("127.0.0.1", 0, 3, True, wait_for_workers=False)
    ps = [subprocess.Popen([sys.executable, __file__, mode, str(r), str(store.port)]) for r in (0, 1)]
    sys.exit(max(p.wait() for p in ps))
rank, port = int(sys.argv[2]), int(sys.argv[3])
store = dist.TCPStore("127.0.0.1", port, 3, False)
def init():
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2, timeout=datetime.timedelta(seconds=2))
if mode == "mesh":  # rank 1 publishes its address, then exits before rank 0 connects
    if rank == 0:
        time.sleep(3)
        init()
    else:
        threading.Thread(target=init, daemon=True).start()
        time.sleep(1.5)
        os._exit(3)
elif mode == "exit":  # rank 1 exits silently while rank 0 waits in all_reduce
    init()
    t = torch.ones(16)
    dist.all_reduce(t)
    if rank == 1:
        time.sleep(0.5)
        os._exit(1)
    dist.all_reduce(t)
"""

_SIGKILL_MID_COLLECTIVE = """
import os, signal, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1 << 20)
dist.all_reduce(t)
if dist.get_rank() == 1:
    os.kill(os.getpid(), signal.SIGKILL)
for _ in range(50):
    dist.all_reduce(t)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(tmp_path, args: list[str], timeout: int = 120) -> str:
    proc = subprocess.run(
        [sys.executable, *args], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        timeout=timeout, env=dict(os.environ, OMP_NUM_THREADS="1"),
    )
    assert proc.returncode != 0, proc.stdout
    return proc.stdout.decode("utf-8", "replace")


def _driver(tmp_path, mode: str) -> str:
    script = tmp_path / "driver.py"
    script.write_text(textwrap.dedent(_DRIVER))
    return _run(tmp_path, [str(script), mode])


@pytest.mark.repro
def test_gloo_connect_full_mesh_failed(tmp_path):
    out = _driver(tmp_path, "mesh")
    assert "Gloo connectFullMesh failed with" in out
    assert scan(out.splitlines()).initiating.id == "gloo-connection-failure"


@pytest.mark.repro
def test_gloo_connection_closed_by_peer_alone(tmp_path):
    out = _driver(tmp_path, "exit")
    assert "Connection closed by peer [127.0.0.1]:" in out
    # Nothing else in the log explains the lost peer, so the Gloo line is the finding.
    assert scan(out.splitlines()).initiating.id == "gloo-connection-failure"


@pytest.mark.repro
def test_gloo_reset_by_peer_is_fallout_of_a_killed_rank(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(_SIGKILL_MID_COLLECTIVE))
    # The agent checks its children every --monitor-interval seconds; at the default (0.1 s) a loaded machine can
    # see the killed rank and stop the survivor before Gloo reports the broken connection.
    out = _run(tmp_path, ["-m", "torch.distributed.run", "--nproc-per-node", "2", "--monitor-interval", "5",
                          "--master-port", str(_free_port()), str(script)])
    assert "Connection reset by peer" in out or "Connection closed by peer" in out
    report = scan(out.splitlines())
    # The rank killed by SIGKILL started it all; the Gloo error on the survivor is collateral.
    assert report.initiating.id != "gloo-connection-failure"
    assert "gloo-connection-failure" in {f.id for f in report.collateral}


# init_process_group(env://) without torchrun: rank 0 hosts the TCPStore. It exits; rank 1 then needs the store.
_STORE_HOST_EXITS = """
import datetime, os, sys, time, torch.distributed as dist
rank = int(sys.argv[1])
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[2], RANK=str(rank), WORLD_SIZE="2")
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=20))
if rank == 0:
    os._exit(1)
time.sleep(1)
dist.new_group([0, 1])
"""


@pytest.mark.repro
def test_tcpstore_host_exits(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(_STORE_HOST_EXITS))
    port = str(_free_port())
    env = dict(os.environ, OMP_NUM_THREADS="1")
    host = subprocess.Popen([sys.executable, str(script), "0", port], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = _run(tmp_path, [str(script), "1", port])
    host.communicate(timeout=60)
    assert "failed on SocketImpl(" in out
    assert "DistNetworkError" in out
    assert scan(out.splitlines()).initiating.id == "tcpstore-connection-lost"
