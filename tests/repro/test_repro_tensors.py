"""Reproductions of the tensor, autograd and DDP-reducer failures on CPU.

Each test writes a small script to tmp_path, runs the real software in a subprocess (plain Python, or
torchrun with two gloo ranks), and checks that `scan` names the expected entry as the root cause.
"""

from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")

from _helpers import run_failing, torchrun_args, write_script  # noqa: E402

from denpex_kb import scan  # noqa: E402

_run = run_failing


def _python(tmp_path, body: str) -> str:
    return _run([sys.executable, str(write_script(tmp_path, "job.py", body))], tmp_path)


def _torchrun(tmp_path, body: str, env: dict[str, str] | None = None) -> str:
    script = write_script(tmp_path, "job.py", body)
    return run_failing(torchrun_args(script), tmp_path, timeout=90, env=env)


def _root(output: str) -> str | None:
    report = scan(output.splitlines())
    return report.initiating.id if report.initiating else None


@pytest.mark.repro
def test_float64_batch_into_float32_linear_is_dtype_mismatch(tmp_path):
    output = _python(
        tmp_path,
        """
        import torch
        model = torch.nn.Linear(4, 2)
        model(torch.randn(8, 4, dtype=torch.float64))
        """,
    )
    assert "must have the same dtype" in output
    assert _root(output) == "tensor-dtype-mismatch"


@pytest.mark.repro
def test_bf16_model_with_fp32_input_under_torchrun_is_dtype_mismatch(tmp_path):
    output = _torchrun(
        tmp_path,
        """
        import torch, torch.distributed as dist
        dist.init_process_group("gloo")
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Linear(8, 2)).to(torch.bfloat16)
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        ddp(torch.randn(4, 8)).float().sum().backward()
        """,
    )
    assert "BFloat16" in output
    assert _root(output) == "tensor-dtype-mismatch"


@pytest.mark.repro
def test_linear_width_mismatch_under_torchrun_is_shape_mismatch(tmp_path):
    output = _torchrun(
        tmp_path,
        """
        import torch, torch.distributed as dist
        dist.init_process_group("gloo")
        model = torch.nn.parallel.DistributedDataParallel(
            torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 16), torch.nn.ReLU(), torch.nn.Linear(16, 10)))
        model(torch.randn(4, 3, 28, 28)).sum().backward()   # 3x28x28 images into a layer built for 1x28x28
        """,
    )
    assert "shapes cannot be multiplied" in output
    assert _root(output) == "tensor-shape-mismatch"


@pytest.mark.repro
def test_variable_length_samples_in_default_collate_is_shape_mismatch(tmp_path):
    output = _python(
        tmp_path,
        """
        import torch
        from torch.utils.data import DataLoader
        for batch in DataLoader([torch.ones(5), torch.ones(7)], batch_size=2):
            pass
        """,
    )
    assert "stack expects each tensor to be equal size" in output
    assert _root(output) == "tensor-shape-mismatch"


@pytest.mark.repro
def test_inplace_add_on_saved_activation_is_inplace_modification(tmp_path):
    output = _python(
        tmp_path,
        """
        import torch
        x = torch.randn(2, 3, requires_grad=True)
        y = torch.relu(x @ torch.randn(3, 3))
        z = y * 2
        y.add_(1)
        z.sum().backward()
        """,
    )
    assert "modified by an inplace operation" in output
    assert _root(output) == "autograd-inplace-modification"


@pytest.mark.repro
def test_optimizer_step_between_backwards_is_inplace_modification(tmp_path):
    output = _python(
        tmp_path,
        """
        import torch
        torch.autograd.set_detect_anomaly(True)
        w = torch.nn.Parameter(torch.randn(3, 3))
        opt = torch.optim.SGD([w], lr=0.1)
        x = torch.randn(2, 3, requires_grad=True)
        loss1 = (x @ w).pow(2).sum()
        loss2 = (x @ w).exp().sum()
        loss1.backward(retain_graph=True)
        opt.step()
        loss2.backward()
        """,
    )
    assert "is at version 1; expected version 0" in output
    assert _root(output) == "autograd-inplace-modification"


@pytest.mark.repro
def test_hidden_state_carried_across_steps_is_backward_twice(tmp_path):
    output = _torchrun(
        tmp_path,
        """
        import torch, torch.distributed as dist
        dist.init_process_group("gloo")
        rnn = torch.nn.parallel.DistributedDataParallel(torch.nn.GRU(4, 8, batch_first=True))
        h = torch.zeros(1, 2, 8)
        for step in range(2):
            out, h = rnn(torch.randn(2, 5, 4), h)   # hidden state not detached between steps
            out.pow(2).mean().backward()
            print(f"step {step} ok", flush=True)
        """,
    )
    assert "Trying to backward through the graph a second time" in output
    assert _root(output) == "autograd-backward-twice"


@pytest.mark.repro
def test_unused_layer_under_ddp_is_unused_parameters(tmp_path):
    output = _torchrun(
        tmp_path,
        """
        import torch, torch.nn as nn, torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Linear(4, 4)
                self.b = nn.Linear(4, 4)  # never used in forward
                self.head = nn.Linear(4, 1)
            def forward(self, x):
                return self.head(torch.relu(self.a(x)))
        dist.init_process_group("gloo")
        model = DDP(Net())
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(3):
            loss = model(torch.randn(8, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """,
        env={"TORCH_DISTRIBUTED_DEBUG": "INFO"},
    )
    assert "Expected to have finished reduction in the prior iteration" in output
    assert "Parameters which did not receive grad for rank" in output
    assert _root(output) == "ddp-unused-parameters"


@pytest.mark.repro
def test_reentrant_checkpoint_twice_under_ddp_is_mark_ready_twice(tmp_path):
    output = _torchrun(
        tmp_path,
        """
        import torch, torch.nn as nn, torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        from torch.utils.checkpoint import checkpoint
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Linear(4, 4)
                self.head = nn.Linear(4, 1)
            def forward(self, x):
                h = checkpoint(self.a, x, use_reentrant=True)
                h = checkpoint(self.a, torch.relu(h), use_reentrant=True)  # same layer checkpointed twice
                return self.head(h)
        dist.init_process_group("gloo")
        model = DDP(Net(), find_unused_parameters=True)
        model(torch.randn(8, 4, requires_grad=True)).pow(2).mean().backward()
        """,
    )
    assert "Expected to mark a variable ready only once" in output
    assert _root(output) == "ddp-mark-variable-ready-twice"


@pytest.mark.repro
def test_distributed_sampler_without_init_is_process_group_not_initialized(tmp_path):
    output = _python(
        tmp_path,
        """
        from torch.utils.data.distributed import DistributedSampler
        DistributedSampler(list(range(10)))
        """,
    )
    assert "Default process group has not been initialized" in output
    assert _root(output) == "process-group-not-initialized"


@pytest.mark.repro
def test_barrier_before_init_under_torchrun_is_process_group_not_initialized(tmp_path):
    output = _torchrun(
        tmp_path,
        """
        import torch.distributed as dist
        dist.barrier()
        """,
    )
    assert "Default process group has not been initialized" in output
    assert _root(output) == "process-group-not-initialized"
