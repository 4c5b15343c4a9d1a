"""Reproductions for the `frameworks` area: run the real software on CPU and check what `scan` names."""

import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

from denpex_kb import scan  # noqa: E402

FSDP_HEADER = """
import torch, torch.distributed as dist, torch.nn as nn
dist.init_process_group("gloo")
"""

SCRIPTS = {
    "fsdp_mixed_dtype": (
        "torchrun",
        FSDP_HEADER
        + """
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
m = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
m[1].half()
FSDP(m, device_id=torch.device("cpu"))
""",
        "fsdp-mixed-dtype-flatten",
    ),
    "fsdp_mixed_requires_grad": (
        "torchrun",
        FSDP_HEADER
        + """
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
m = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
m[0].weight.requires_grad_(False)
FSDP(m, device_id=torch.device("cpu"))
""",
        "fsdp-mixed-dtype-flatten",
    ),
    "fsdp2_mixed_dtype": (
        "torchrun",
        FSDP_HEADER
        + """
from torch.distributed.fsdp import fully_shard
m = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
m[1].to(torch.bfloat16)
fully_shard(m)
m(torch.randn(2, 4))
""",
        "fsdp-mixed-dtype-flatten",
    ),
    "fsdp2_meta_not_materialized": (
        "torchrun",
        FSDP_HEADER
        + """
from torch.distributed.fsdp import fully_shard
with torch.device("meta"):
    m = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
fully_shard(m)
m(torch.randn(2, 4))
""",
        "fsdp-param-not-materialized",
    ),
    "meta_module_to": (
        "python",
        """
import torch, torch.nn as nn
with torch.device("meta"):
    m = nn.Linear(4, 4)
m.to("cpu")
""",
        "fsdp-param-not-materialized",
    ),
    "checkpoint_frozen_inputs": (
        "torchrun",
        FSDP_HEADER
        + """
from torch.utils.checkpoint import checkpoint
emb = nn.Embedding(10, 4); emb.weight.requires_grad_(False)
lin = nn.Linear(4, 4)
y = checkpoint(lin, emb(torch.tensor([1, 2])), use_reentrant=True)
y.sum().backward()
""",
        "gradient-checkpointing-no-grad",
    ),
    "compile_backend_failed": (
        "python",
        """
import torch
def bad_backend(gm, example_inputs):
    raise RuntimeError("backend exploded")
torch.compile(lambda x: x.sin() + 1, backend=bad_backend)(torch.randn(4))
""",
        "torch-compile-failure",
    ),
    "compile_recompile_limit": (
        "python",
        """
import torch
torch._dynamo.config.recompile_limit = 2
torch._dynamo.config.fail_on_recompile_limit_hit = True
@torch.compile(dynamic=False, backend="eager")
def f(x, n):
    return x * n
for i in range(5):
    f(torch.randn(4), i)
""",
        "torch-compile-failure",
    ),
}


def _run(tmp_path, launcher: str, body: str) -> str:
    script = tmp_path / "repro.py"
    script.write_text(textwrap.dedent(body))
    if launcher == "torchrun":
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(script)]
    else:
        cmd = [sys.executable, str(script)]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode != 0, "the reproduction was expected to fail"
    return proc.stdout + proc.stderr


@pytest.mark.repro
@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_repro_frameworks(tmp_path, name):
    launcher, body, expected = SCRIPTS[name]
    output = _run(tmp_path, launcher, body)
    report = scan(output.splitlines())
    assert report.initiating is not None, output[-3000:]
    assert report.initiating.id == expected, output[-3000:]
