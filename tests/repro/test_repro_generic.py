"""Reproductions of the generic Python failures: missing file, permission denied, missing module.

Each test runs a small script in a subprocess (plain Python or torchrun on CPU) and checks that `scan`
names the expected entry as the root cause.
"""

from __future__ import annotations

import os
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

from _helpers import run_failing, torchrun_args  # noqa: E402

from denpex_kb import scan  # noqa: E402

_run = run_failing


def _torchrun(script, cwd) -> list[str]:
    return torchrun_args(script, tee=True)


@pytest.mark.repro
def test_missing_checkpoint_is_file_not_found(tmp_path):
    script = tmp_path / "resume.py"
    script.write_text(
        textwrap.dedent(
            """
            import os, torch
            rank = int(os.environ.get("RANK", "0"))
            torch.load(os.path.join(os.path.dirname(__file__), "missing", f"ckpt_rank{rank}.pt"))
            """
        )
    )
    output = _run(_torchrun(script, tmp_path), tmp_path)
    assert "FileNotFoundError" in output
    assert scan(output.splitlines()).initiating.id == "file-not-found"


@pytest.mark.repro
def test_unwritable_output_dir_is_permission_denied(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    script = tmp_path / "save.py"
    if os.geteuid() == 0:
        # root ignores directory modes: drop to nobody inside the child before writing
        locked.chmod(0o755)
        drop = "os.setgid(65534); os.setuid(65534)"
    else:
        locked.chmod(0o555)
        drop = "pass"
    script.write_text(
        textwrap.dedent(
            f"""
            import os
            {drop}
            os.makedirs({str(locked / "outputs" / "run1")!r}, exist_ok=True)
            """
        )
    )
    try:
        output = _run([sys.executable, str(script)], tmp_path)
    finally:
        locked.chmod(0o755)
    assert "PermissionError" in output
    assert scan(output.splitlines()).initiating.id == "permission-denied"


@pytest.mark.repro
def test_missing_package_is_module_not_found(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import torch\nimport denpex_missing_package_for_test\n")
    output = _run(_torchrun(script, tmp_path), tmp_path)
    assert "ModuleNotFoundError" in output
    assert scan(output.splitlines()).initiating.id == "python-module-not-found"
