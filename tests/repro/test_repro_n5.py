"""Reproductions for the n5 entries: indexing, views, autograd misuse, optimizer set-up, GradScaler, SIGFPE.

Each test writes a small script to tmp_path, runs the real software in a subprocess (plain Python, or torchrun
with two gloo ranks), asserts the real text appears and that `scan` names the expected entry as the root cause.
"""

from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")

from _helpers import run_failing, torchrun_args, write_script  # noqa: E402

from denpex_kb import scan  # noqa: E402


def _python(tmp_path, body: str) -> str:
    return run_failing([sys.executable, str(write_script(tmp_path, "job.py", body))], tmp_path)


def _torchrun(tmp_path, body: str, env: dict[str, str] | None = None) -> str:
    script = write_script(tmp_path, "job.py", body)
    return run_failing(torchrun_args(script), tmp_path, timeout=90, env=env)


def _root(output: str) -> str | None:
    report = scan(output.splitlines())
    return report.initiating.id if report.initiating else None


@pytest.mark.repro
def test_token_id_past_vocabulary_is_embedding_index_out_of_range(tmp_path):
    output = _python(
        tmp_path,
        """
        import torch
        emb = torch.nn.Embedding(100, 8)        # vocabulary of 100 rows
        emb(torch.tensor([[1, 5, 100]]))        # id 100: a token added to the tokenizer only
        """,
    )
    assert "IndexError: index out of range in self" in output
    assert _root(output) == "embedding-index-out-of-range"


@pytest.mark.repro
def test_token_id_past_vocabulary_under_torchrun_is_embedding_index_out_of_range(tmp_path):
    output = _torchrun(
        tmp_path,
        """
        import torch, torch.distributed as dist
        dist.init_process_group("gloo")
        emb = torch.nn.parallel.DistributedDataParallel(torch.nn.Embedding(100, 8))
        ids = torch.randint(0, 100, (2, 4))
        if dist.get_rank() == 1:
            ids[0, 0] = 100
        emb(ids).sum().backward()
        """,
    )
    assert "[rank1]: IndexError: index out of range in self" in output
    assert _root(output) == "embedding-index-out-of-range"


@pytest.mark.repro
def test_view_after_transpose_is_view_non_contiguous(tmp_path):
    output = _python(
        tmp_path,
        """
        import torch
        torch.randn(4, 6).t().view(-1)
        """,
    )
    assert "view size is not compatible with input tensor's size and stride" in output
    assert _root(output) == "view-non-contiguous"


@pytest.mark.repro
def test_topk_accuracy_view_under_torchrun_is_view_non_contiguous(tmp_path):
    output = _torchrun(
        tmp_path,
        """
        import torch, torch.distributed as dist
        dist.init_process_group("gloo")
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 10))
        output, target = model(torch.randn(8, 16)), torch.randint(0, 10, (8,))
        pred = output.topk(5, 1, True, True)[1].t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))
        acc5 = correct[:5].view(-1).float().sum(0, keepdim=True)
        """,
    )
    assert "Use .reshape(...) instead." in output
    assert _root(output) == "view-non-contiguous"


@pytest.mark.repro
def test_manual_sgd_step_under_torchrun_is_autograd_leaf_inplace(tmp_path):
    output = _torchrun(
        tmp_path,
        """
        import torch, torch.distributed as dist
        dist.init_process_group("gloo")
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2))
        model(torch.randn(8, 4)).pow(2).mean().backward()
        for p in model.parameters():
            p -= 0.1 * p.grad          # manual SGD step outside torch.no_grad()
        """,
    )
    assert "a leaf Variable that requires grad is being used in an in-place operation" in output
    assert _root(output) == "autograd-leaf-inplace"


@pytest.mark.repro
def test_unreduced_loss_under_torchrun_is_backward_non_scalar(tmp_path):
    output = _torchrun(
        tmp_path,
        """
        import torch, torch.distributed as dist
        dist.init_process_group("gloo")
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2))
        loss = torch.nn.functional.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 2), reduction="none")
        loss.backward()
        """,
    )
    assert "grad can be implicitly created only for scalar outputs" in output
    assert _root(output) == "backward-non-scalar"


@pytest.mark.repro
def test_grad_wrt_detached_input_under_torchrun_is_autograd_unused_input(tmp_path):
    output = _torchrun(
        tmp_path,
        """
        import torch, torch.distributed as dist
        dist.init_process_group("gloo")
        x = torch.randn(8, 3, requires_grad=True)
        model = torch.nn.Sequential(torch.nn.Linear(3, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
        energy = model(x.detach()).sum()          # input detached: x is not in the graph
        forces = -torch.autograd.grad(energy, x, create_graph=True)[0]
        """,
    )
    assert "appears to not have been used in the graph" in output
    assert _root(output) == "autograd-unused-input"


@pytest.mark.repro
def test_layers_in_plain_list_under_torchrun_is_optimizer_empty_params(tmp_path):
    output = _torchrun(
        tmp_path,
        """
        import torch, torch.nn as nn, torch.distributed as dist
        dist.init_process_group("gloo")
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = [nn.Linear(4, 4), nn.Linear(4, 1)]   # a plain list: not registered
            def forward(self, x):
                for layer in self.layers:
                    x = layer(x)
                return x
        opt = torch.optim.Adam(Net().parameters(), lr=1e-3)
        """,
    )
    assert "optimizer got an empty parameter list" in output
    assert _root(output) == "optimizer-empty-params"


@pytest.mark.repro
def test_resume_after_freezing_under_torchrun_is_optimizer_state_group_mismatch(tmp_path):
    output = _torchrun(
        tmp_path,
        """
        import torch, torch.distributed as dist
        dist.init_process_group("gloo")
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        model(torch.randn(2, 4)).sum().backward(); opt.step()
        ckpt = {"optimizer": opt.state_dict()}
        model[0].requires_grad_(False)       # resume with the first layer frozen
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
        opt.load_state_dict(ckpt["optimizer"])
        """,
    )
    assert "doesn't match the size of optimizer's group" in output
    assert _root(output) == "optimizer-state-group-mismatch"


@pytest.mark.repro
def test_fp16_weights_with_grad_scaler_under_torchrun_is_amp_unscale_fp16_gradients(tmp_path):
    output = _torchrun(
        tmp_path,
        """
        import torch, torch.distributed as dist
        dist.init_process_group("gloo")
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2).half())   # fp16 weights
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        scaler = torch.amp.GradScaler("cpu")
        loss = model(torch.randn(2, 4).half()).float().sum()
        scaler.scale(loss).backward()
        scaler.step(opt)
        """,
    )
    assert "Attempting to unscale FP16 gradients." in output
    assert _root(output) == "amp-unscale-fp16-gradients"


@pytest.mark.repro
def test_rank_raising_sigfpe_under_torchrun_is_floating_point_exception(tmp_path):
    output = _torchrun(
        tmp_path,
        """
        import ctypes, signal, torch.distributed as dist
        dist.init_process_group("gloo")
        if dist.get_rank() == 1:
            getattr(ctypes.CDLL(None), "raise")(signal.SIGFPE)    # native code raising SIGFPE
        dist.barrier()
        """,
    )
    assert "failed (exitcode: -8)" in output
    assert "Signal 8 (SIGFPE) received by PID" in output
    assert _root(output) == "floating-point-exception"
