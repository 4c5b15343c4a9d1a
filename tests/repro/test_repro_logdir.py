"""torchrun --log-dir --redirects 3: per-rank files without rank prefixes. `scan` reads the rank from the path
(<log-dir>/<run id>/attempt_<n>/<local rank>/stderr.log) and names the failing rank, captured with real torchrun
on the CPU (gloo)."""

from __future__ import annotations

import sys

import pytest

from denpex_kb import scan_many

pytest.importorskip("torch")

from _helpers import run_failing, write_script

# Rank 1 indexes past its batch; rank 0 waits in the next collective and is stopped by the agent.
SCRIPT = """
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(4)
dist.all_reduce(t)
if dist.get_rank() == 1:
    batch = {"input_ids": t}
    batch["labels"]
dist.all_reduce(t)
"""


@pytest.mark.repro
def test_per_rank_files_give_the_rank_from_their_path(tmp_path):
    script = write_script(tmp_path, "job.py", SCRIPT)
    logs = tmp_path / "logs"
    run_failing([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--log-dir", str(logs),
                 "--redirects", "3", "--monitor-interval", "1", str(script)], cwd=tmp_path, timeout=120)
    files = sorted(logs.rglob("stderr.log"))
    assert [f.parent.name for f in files] == ["0", "1"] and all(f.parent.parent.name.startswith("attempt_") for f in files)
    assert "KeyError: 'labels'" in files[1].read_text()
    report = scan_many(files)
    init = report.initiating
    assert init is not None and init.exception == "KeyError" and init.rank == 1
    assert init.file == str(files[1])


# The same failure with @record: the rank writes its exception to TORCHELASTIC_ERROR_FILE (error.json beside its
# logs). The console is not redirected here, so the logs hold no traceback at all: only the error file does.
RECORDED = """
import torch, torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

@record
def main():
    dist.init_process_group("gloo")
    t = torch.ones(4)
    dist.all_reduce(t)
    if dist.get_rank() == 1:
        raise FloatingPointError("loss scale underflow at step 3")
    dist.all_reduce(t)

main()
"""


@pytest.mark.repro
def test_the_error_file_beside_the_logs_is_the_ranks_own_account(tmp_path):
    script = write_script(tmp_path, "job.py", RECORDED)
    logs = tmp_path / "logs"
    run_failing([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--log-dir", str(logs),
                 "--redirects", "1", "--monitor-interval", "1", str(script)], cwd=tmp_path, timeout=120)
    # Both ranks record: rank 1 its own exception, rank 0 Gloo's "Connection closed by peer" (fallout).
    error_files = sorted(logs.rglob("error.json"))
    assert [f.parent.name for f in error_files] == ["0", "1"]
    stdout_logs = sorted(logs.rglob("stdout.log"))
    report = scan_many(stdout_logs)  # the error files are found beside the ranks' logs
    init = report.initiating
    assert init is not None and init.exception == "FloatingPointError" and init.rank == 1
    assert init.file == str(error_files[1]) and init.values.get("error_file")
    assert "gloo-connection-failure" in {f.id for f in report.collateral}
    assert scan_many(error_files).initiating.exception == "FloatingPointError"  # or given themselves
