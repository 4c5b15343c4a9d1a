"""Reproductions for deepspeed-batch-size-mismatch on CPU without a launcher, checked against denpex_kb.scan.

DeepSpeedConfig reads the world size from torch.distributed and falls back to 1 when no process group exists, so a
config written for several GPUs and parsed in a plain Python process fails the batch assertion with `* 1`; a config
without either batch field fails in _set_batch_related_parameters. Needs deepspeed; skipped otherwise.
"""

import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("deepspeed")

from _helpers import run_failing, write_script

import denpex_kb

SCRIPTS = {
    "world-size-one": (
        """
        from deepspeed.runtime.config import DeepSpeedConfig
        # an 8-GPU recipe (16 = 2 * 1 * 8) parsed before torch.distributed is initialised
        DeepSpeedConfig({"train_batch_size": 16, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1})
        """,
        "train_batch_size is not equal to micro_batch_per_gpu * gradient_acc_step * world_size 16 != 2 * 1 * 1",
    ),
    "no-batch-field": (
        """
        from deepspeed.runtime.config import DeepSpeedConfig
        DeepSpeedConfig({"gradient_accumulation_steps": 2})
        """,
        "Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided",
    ),
}


@pytest.mark.repro
@pytest.mark.parametrize("case", sorted(SCRIPTS))
def test_repro_deepspeed_batch_config(tmp_path, case):
    body, expected = SCRIPTS[case]
    script = write_script(tmp_path, "repro.py", body)
    output = run_failing([sys.executable, str(script)], cwd=tmp_path, timeout=120)
    assert expected in output, output[-3000:]
    report = denpex_kb.scan(output.splitlines())
    assert report.initiating is not None, output[-3000:]
    assert report.initiating.id == "deepspeed-batch-size-mismatch", output[-3000:]
