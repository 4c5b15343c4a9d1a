"""Reproductions of DeepSpeed failures on CPU (gloo), checked against denpex_kb.scan.

Needs deepspeed importable by the test interpreter; skipped otherwise. DeepSpeed's CPU accelerator JIT-builds its
shared-memory comm op on first use (minutes on a small machine), later runs reuse ~/.cache/torch_extensions.
"""

import socket
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("deepspeed")

import denpex_kb  # noqa: E402

PRELUDE = """
import logging, sys, torch, deepspeed
from deepspeed.utils import logger as _dl
_dl.setLevel(logging.INFO)
for _h in _dl.handlers: _h.setLevel(logging.INFO)
"""

SCRIPTS = {
    "deepspeed-batch-size-mismatch": """
model = torch.nn.Linear(8, 8)
cfg = {"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
       "optimizer": {"type": "SGD", "params": {"lr": 0.01}}}
deepspeed.initialize(model=model, model_parameters=model.parameters(), config=cfg)
""",
    "deepspeed-config-invalid": """
model = torch.nn.Linear(8, 8)
cfg = {"train_batch_size": 2, "optimizer": {"type": "SGD", "params": {"lr": 0.01}},
       "zero_optimization": {"stage": 2, "overlap_com": True}}
deepspeed.initialize(model=model, model_parameters=model.parameters(), config=cfg)
""",
    # DeepSpeed's CPU accelerator allows fp16 only where oneDNN reports fp16 support
    # (torch.ops.mkldnn._is_mkldnn_fp16_supported(), since DeepSpeed 0.16.8); CPUs without it stop at the engine's
    # sanity check ("Type fp16 is not supported on your device."). The loss scaler under test is device-independent,
    # so the gate is opened to reach it on any CPU.
    "deepspeed-fp16-loss-scale-at-minimum": """
from deepspeed.accelerator import get_accelerator
get_accelerator().is_fp16_supported = lambda: True
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 1))
cfg = {"train_micro_batch_size_per_gpu": 2,
       "optimizer": {"type": "Adam", "params": {"lr": 0.01, "torch_adam": True}},
       "fp16": {"enabled": True, "initial_scale_power": 6, "hysteresis": 2, "min_loss_scale": 1},
       "zero_optimization": {"stage": 2}}
engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=cfg)
for _ in range(12):
    loss = engine(torch.randn(2, 8, dtype=torch.half)).float().sum() * float("inf")
    engine.backward(loss)
    engine.step()
""",
    "deepspeed-zero3-param-not-gathered": """
import torch.nn.functional as F
cfg = {"train_micro_batch_size_per_gpu": 2,
       "optimizer": {"type": "Adam", "params": {"lr": 0.01, "torch_adam": True}},
       "zero_optimization": {"stage": 3}}
with deepspeed.zero.Init(config_dict_or_path=cfg):
    model = torch.nn.Sequential(torch.nn.Embedding(16, 8), torch.nn.Linear(8, 8))
engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=cfg)
F.embedding(torch.randint(0, 16, (2, 4)), engine.module[0].weight)
""",
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _run(tmp_path, body: str, nproc: int = 2) -> str:
    script = tmp_path / "repro.py"
    script.write_text(textwrap.dedent(PRELUDE) + textwrap.dedent(body))
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--master-port", str(_free_port()),
         str(script)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )
    return proc.stdout + proc.stderr


@pytest.mark.repro
@pytest.mark.parametrize("entry_id", sorted(SCRIPTS))
def test_repro_deepspeed(tmp_path, entry_id):
    output = _run(tmp_path, SCRIPTS[entry_id])
    report = denpex_kb.scan(output.splitlines())
    assert report.initiating is not None, output[-3000:]
    assert report.initiating.id == entry_id, output[-3000:]


@pytest.mark.repro
def test_repro_deepspeed_checkpoint_world_size(tmp_path):
    common = """
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 1))
cfg = {"train_micro_batch_size_per_gpu": 2,
       "optimizer": {"type": "Adam", "params": {"lr": 0.01, "torch_adam": True}},
       "zero_optimization": {"stage": 2}}
engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=cfg)
"""
    save = common + f"""
for _ in range(2):
    loss = engine(torch.randn(2, 8)).pow(2).mean()
    engine.backward(loss)
    engine.step()
engine.save_checkpoint({str(tmp_path / 'ckpt')!r}, tag="step2")
"""
    load = common + f"engine.load_checkpoint({str(tmp_path / 'ckpt')!r})\n"
    saved = _run(tmp_path, save, nproc=2)
    assert (tmp_path / "ckpt" / "step2").is_dir(), saved[-3000:]
    output = _run(tmp_path, load, nproc=1)
    report = denpex_kb.scan(output.splitlines())
    assert report.initiating is not None, output[-3000:]
    assert report.initiating.id == "deepspeed-checkpoint-world-size-change", output[-3000:]
