"""`scan` on failures no signature names: a rank's last exception line printed without a traceback, and
unknown exception lines that the matcher's fuzzy and evidence tiers can still name (labelled as such)."""

from __future__ import annotations

import subprocess
import sys

from test_scan import FAILED, HEALTHY, OOM, SIGTERM, WATCHDOG

from denpex_kb import scan

# A training loop that catches a failed check and prints it the way many trainers log an exception, then exits:
# no "Traceback" header, only the exception's own line as the rank's last words.
LAST_WORDS = (
    "try:\n    assert False, 'grad norm is not finite at step 41'\n"
    "except AssertionError as e:\n    print(f'{type(e).__name__}: {e}', flush=True)\n    raise SystemExit(1)\n"
)


def _captured(code: str) -> list[str]:
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return (run.stdout + run.stderr).splitlines()


def _traceback(rank: int, last: str) -> list[str]:
    return [f"[rank{rank}]: Traceback (most recent call last):", f'[rank{rank}]:   File "train.py", line 88, in <module>',
            f"[rank{rank}]:     loss = model(batch)", f"[rank{rank}]: {last}"]


def test_a_ranks_last_exception_line_without_traceback_is_the_initiating_failure():
    words = [f"[rank2]: {line}" for line in _captured(LAST_WORDS)]
    assert words == ["[rank2]: AssertionError: grad norm is not finite at step 41"]
    report = scan(list(HEALTHY) + words + [SIGTERM, FAILED])
    init = report.initiating
    assert init is not None and init.id is None and init.rank == 2
    assert init.exception == "AssertionError" and init.without_traceback
    assert {f.id for f in report.collateral} >= {"torchrun-child-failed"}


def test_a_bare_exception_line_in_a_healthy_log_is_not_a_failure():
    words = [f"[rank2]: {line}" for line in _captured(LAST_WORDS)]
    assert scan(list(HEALTHY) + words + list(HEALTHY)).initiating is None


def test_a_bare_exception_line_does_not_displace_a_known_root_cause():
    words = [f"[rank2]: {line}" for line in _captured(LAST_WORDS)]
    report = scan(list(HEALTHY) + _traceback(3, OOM) + words + [SIGTERM, FAILED])
    assert report.initiating is not None and report.initiating.id == "cuda-out-of-memory"
    assert all(f.exception != "AssertionError" for f in report.findings)


def test_custom_exception_classes_are_exceptions():
    for name in ("TrainingAbort", "DataLoaderFailure", "EarlyExit"):
        report = scan(list(HEALTHY) + _traceback(1, f"{name}: stopping at step 7") + [FAILED])
        assert report.initiating is not None and report.initiating.exception == name, name


def test_an_unknown_exception_close_to_a_known_wording_is_named_fuzzy():
    cut = OOM[: OOM.index("Tried to allocate") + len("Tried to alloc")]  # a message cut off mid-word
    report = scan(list(HEALTHY) + _traceback(3, cut) + [f"[rank{r}]:{WATCHDOG}" for r in (0, 1)] + [FAILED])
    init = report.initiating
    assert init is not None and init.id == "cuda-out-of-memory" and init.tier == "fuzzy" and init.rank == 3
    assert report.to_dict()["initiating"]["tier"] == "fuzzy"


def test_an_exception_class_alone_is_named_by_evidence():
    report = scan(list(HEALTHY) + _traceback(3, "torch.OutOfMemoryError") + [FAILED])
    init = report.initiating
    assert init is not None and init.id == "cuda-out-of-memory" and init.tier == "evidence"


def test_signature_findings_say_they_are_exact():
    report = scan(list(HEALTHY) + _traceback(3, OOM) + [FAILED])
    assert report.initiating is not None and report.initiating.tier == "exact"


def test_a_fuzzy_named_line_does_not_displace_a_later_root_cause_a_signature_names():
    cut = OOM[: OOM.index("Tried to allocate") + len("Tried to alloc")]
    ima = "RuntimeError: CUDA error: an illegal memory access was encountered"
    report = scan(list(HEALTHY) + _traceback(3, cut) + _traceback(1, ima) + [FAILED])
    assert report.initiating is not None and report.initiating.id == "cuda-illegal-memory-access"
    assert report.initiating.tier == "exact"
    assert any(f.id == "cuda-out-of-memory" and f.tier == "fuzzy" for f in report.collateral)
