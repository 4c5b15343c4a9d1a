"""Reproductions for checkpoint loading, wrapping, adapter and DTensor failures on CPU.

Each test writes a small script to tmp_path, runs the real software in a subprocess (plain Python or torchrun with
two gloo ranks) and checks that `scan` names the expected entry as the root cause. Tests that need safetensors,
peft, transformers or accelerate run them with the interpreter named by DENPEX_N8_PYTHON (default: this one)
and skip when that interpreter lacks the package.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from _helpers import run_failing, torchrun_args, write_script  # noqa: E402

from denpex_kb import scan  # noqa: E402


def _root(output: str) -> str | None:
    report = scan(output.splitlines())
    return report.initiating.id if report.initiating else None


def _extra_python(*modules: str) -> str:
    """An interpreter that has `modules` installed, or skip."""
    python = os.environ.get("DENPEX_N8_PYTHON", sys.executable)
    probe = subprocess.run([python, "-c", "import " + ", ".join(modules)], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"{python} lacks {', '.join(modules)}; set DENPEX_N8_PYTHON to an interpreter that has them")
    return python


@pytest.mark.repro
def test_model_class_from_training_main_is_unpickle_attribute(tmp_path):
    write_script(
        tmp_path,
        "train.py",
        """
        import torch
        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(2, 2)
        torch.save(Net(), "full.pt")
        """,
    )
    subprocess.run([sys.executable, "train.py"], cwd=tmp_path, check=True)
    script = write_script(tmp_path, "infer.py", "import torch\ntorch.load('full.pt', weights_only=False)\n")
    output = run_failing([sys.executable, str(script)], tmp_path)
    assert "Can't get attribute 'Net' on <module '__main__'" in output
    assert _root(output) == "checkpoint-unpickle-attribute"


@pytest.mark.repro
def test_repo_package_missing_under_torchrun_is_unpickle_attribute(tmp_path):
    repo = tmp_path / "repo"
    (repo / "models").mkdir(parents=True)
    (repo / "models" / "__init__.py").write_text("")
    write_script(
        repo / "models",
        "yolo.py",
        """
        import torch
        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(2, 2)
        """,
    )
    subprocess.run(
        [sys.executable, "-c", "import torch; from models.yolo import Model; torch.save({'model': Model()}, '../best.pt')"],
        cwd=repo, check=True,
    )
    script = write_script(
        tmp_path,
        "job.py",
        """
        import torch, torch.distributed as dist
        dist.init_process_group("gloo")
        ckpt = torch.load("best.pt", map_location="cpu", weights_only=False)
        """,
    )
    output = run_failing(torchrun_args(script), tmp_path, timeout=90)
    assert "ModuleNotFoundError: No module named 'models'" in output
    assert _root(output) == "checkpoint-unpickle-attribute"


@pytest.mark.repro
def test_wrap_list_naming_absent_class_is_fsdp_wrap_class_not_found(tmp_path):
    python = _extra_python("accelerate")
    script = write_script(
        tmp_path,
        "job.py",
        """
        import torch, torch.nn as nn, torch.distributed as dist
        from accelerate.utils import FullyShardedDataParallelPlugin
        dist.init_process_group("gloo")
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 8)
        class Model(nn.Module):
            _no_split_modules = ["Block"]
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList([Block(), Block()])
        plugin = FullyShardedDataParallelPlugin(
            auto_wrap_policy="transformer_based_wrap", transformer_cls_names_to_wrap=["LlamaDecoderLayer"])
        plugin.set_auto_wrap_policy(Model())   # what Accelerator.prepare_model does for FSDP1
        """,
    )
    args = [python, "-m", "torch.distributed.run", "--nproc-per-node", "2", str(script)]
    output = run_failing(args, tmp_path, timeout=120)
    assert "Could not find the transformer layer class LlamaDecoderLayer in the model" in output
    assert _root(output) == "fsdp-wrap-class-not-found"


@pytest.mark.repro
def test_llama_lora_names_on_other_model_is_peft_target_modules_not_found(tmp_path):
    python = _extra_python("peft")
    script = write_script(
        tmp_path,
        "job.py",
        """
        import torch.nn as nn, torch.distributed as dist
        from peft import LoraConfig, get_peft_model
        dist.init_process_group("gloo")
        class Block(nn.Module):   # attention projection named like Bloom's, not Llama's
            def __init__(self):
                super().__init__()
                self.query_key_value = nn.Linear(8, 24)
                self.dense = nn.Linear(8, 8)
        get_peft_model(nn.Sequential(Block(), Block()), LoraConfig(target_modules=["q_proj", "v_proj"]))
        """,
    )
    args = [python, "-m", "torch.distributed.run", "--nproc-per-node", "2", str(script)]
    output = run_failing(args, tmp_path, timeout=120)
    assert "not found in the base model. Please check the target modules and try again." in output
    assert _root(output) == "peft-target-modules-not-found"


@pytest.mark.repro
def test_fsdp2_parameter_used_outside_forward_is_dtensor_mixed_tensor(tmp_path):
    pytest.importorskip("torch.distributed.fsdp")
    script = write_script(
        tmp_path,
        "job.py",
        """
        import torch, torch.nn as nn, torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        dist.init_process_group("gloo")
        model = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 4))
        for layer in model:
            fully_shard(layer)
        fully_shard(model)
        h = model[0](torch.randn(2, 8))
        logits = h @ model[1].weight.t()   # a sharded parameter used outside its module's forward
        """,
    )
    output = run_failing(torchrun_args(script), tmp_path, timeout=120)
    assert "got mixed torch.Tensor and DTensor" in output
    assert _root(output) == "dtensor-mixed-tensor"
