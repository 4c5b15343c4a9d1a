"""Reproductions for the comm-launch mining pass (CPU only).

The DataLoader timeout run under `torchrun --tee 3`, so the worker's traceback carries the `[default0]:`
prefix users paste; `scan` must name dataloader-timeout as the initiating failure.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from _helpers import run_failing, torchrun_args, write_script  # noqa: E402

from denpex_kb import scan  # noqa: E402


def _root(output: str) -> str | None:
    report = scan(output.splitlines())
    return report.initiating.id if report.initiating else None


@pytest.mark.repro
def test_dataloader_timeout_under_torchrun_tee_is_dataloader_timeout(tmp_path):
    script = write_script(
        tmp_path,
        "job.py",
        """
        import time, torch
        from torch.utils.data import DataLoader, Dataset

        class Slow(Dataset):
            def __len__(self):
                return 4

            def __getitem__(self, i):
                time.sleep(5)
                return torch.zeros(1)

        if __name__ == "__main__":
            for _ in DataLoader(Slow(), num_workers=1, timeout=2):
                pass
        """,
    )
    output = run_failing(torchrun_args(script, nproc=1, tee=True), tmp_path, timeout=90)
    assert "[default0]:RuntimeError: DataLoader timed out after 2 seconds" in output
    assert _root(output) == "dataloader-timeout"
