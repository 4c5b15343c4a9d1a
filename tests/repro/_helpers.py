"""Running a small failing script for real (plain Python or torchrun on the CPU) and capturing its output."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path


def run_failing(args: list[str], cwd: Path, timeout: int = 60, env: dict[str, str] | None = None) -> str:
    """Run `args`, require that it fails (it is a reproduction), and return stdout and stderr interleaved."""
    proc = subprocess.run(
        args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout,
        env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
    )
    assert proc.returncode != 0, proc.stdout
    return proc.stdout


def write_script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def torchrun_args(script: Path, nproc: int = 2, tee: bool = False) -> list[str]:
    """torchrun as users run it; `tee` adds the `[defaultN]:` prefixes of `--tee 3`."""
    args = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc)]
    return args + (["--tee", "3"] if tee else []) + [str(script)]
