"""Reproductions for two DeepSpeed entries, run for real on CPU (gloo) and checked against denpex_kb.scan.

ZeRO++ small-parameter partitioning: the failure exists in DeepSpeed 0.13.5-0.19.4 only. With the DeepSpeed the test
interpreter imports (0.19.5+ in CI) the test asserts that the same script now initializes; set DENPEX_DS_OLD_PATH to a
`pip install --no-deps --target DIR deepspeed==0.19.4` directory to run the failing case against that release.
"""

import os
import socket
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
deepspeed = pytest.importorskip("deepspeed")

from packaging.version import Version  # noqa: E402

import denpex_kb  # noqa: E402

HPZ_SCRIPT = """
import torch, deepspeed
cfg = {"train_micro_batch_size_per_gpu": 1,
       "optimizer": {"type": "Adam", "params": {"lr": 0.01, "torch_adam": True}},
       "zero_optimization": {"stage": 3, "zero_hpz_partition_size": 2}}
with deepspeed.zero.Init(config_dict_or_path=cfg):
    model = torch.nn.Linear(8, 1)   # bias of 1 element, 4 ranks, hpZ group of 2
engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=cfg)
print("hpz init ok", flush=True)
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _run(tmp_path, body: str, nproc: int, pythonpath: str | None = None) -> subprocess.CompletedProcess:
    script = tmp_path / "repro.py"
    script.write_text(textwrap.dedent(body))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--master-port",
         str(_free_port()), str(script)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env,
    )


def _assert_hpz_failure(proc: subprocess.CompletedProcess) -> None:
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output[-3000:]
    assert "in _partition_param_sec" in output, output[-3000:]
    assert "IndexError: start out of range" in output, output[-3000:]
    report = denpex_kb.scan(output.splitlines())
    assert report.initiating is not None, output[-3000:]
    assert report.initiating.id == "deepspeed-zero3-small-param-partition", output[-3000:]


@pytest.mark.repro
def test_repro_zero3_small_param_partition(tmp_path):
    version = Version(deepspeed.__version__.split("+")[0])
    proc = _run(tmp_path, HPZ_SCRIPT, nproc=4)
    if version >= Version("0.19.5"):  # PR #8210: the empty secondary shard is skipped
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
        assert proc.stdout.count("hpz init ok") == 4
    elif version >= Version("0.14.4"):
        _assert_hpz_failure(proc)
    else:
        pytest.skip(f"deepspeed {version}: the IndexError form needs 0.14.4-0.19.4")


@pytest.mark.repro
@pytest.mark.skipif(not os.environ.get("DENPEX_DS_OLD_PATH"), reason="DENPEX_DS_OLD_PATH (deepspeed 0.19.4) not set")
def test_repro_zero3_small_param_partition_old_release(tmp_path):
    _assert_hpz_failure(_run(tmp_path, HPZ_SCRIPT, nproc=4, pythonpath=os.environ["DENPEX_DS_OLD_PATH"]))
