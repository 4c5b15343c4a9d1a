"""What a launcher's exit code says: one table, read by the scan's hints (causality.py) and by the verdict."""

from __future__ import annotations

from typing import NamedTuple


class ExitCode(NamedTuple):
    signal: str
    short: str  # what the code says alone, in a few words (the verdict's reason)
    meaning: str  # the same, as a sentence for a scan hint
    likely: str | None  # the entry it most often means: a hint points there
    # Whether `likely` is sure enough for a verdict to name it when nothing else in the log explains the code
    # (a SIGKILL may as well be the scheduler's as the OOM killer's, so not for -9)
    names_likely: bool
    explained_by: tuple[str, ...] = ()  # entries whose presence in the same log explain the code instead


LAUNCHER_EXITS: dict[int, ExitCode] = {
    -6: ExitCode("SIGABRT", "SIGABRT: the rank aborted itself",
                 "the process aborted itself (a failed C++ check or abort()); look for the last error it printed",
                 None, False, ("nccl-watchdog-timeout", "collective-mismatch-desync")),
    -7: ExitCode("SIGBUS", "SIGBUS, most often /dev/shm exhausted",
                 "a bus error, most often shared memory (/dev/shm) running out", "dataloader-worker-killed-shm", True),
    -8: ExitCode("SIGFPE", "SIGFPE, a floating-point exception in native code",
                 "a floating-point exception (an integer division by zero) in native code", "floating-point-exception",
                 True),
    -9: ExitCode("SIGKILL", "SIGKILL: killed from outside (the host OOM killer, the scheduler or a person)",
                 "killed from outside, most often by the host OOM killer or the scheduler", "host-oom-killed", False,
                 ("host-oom-killed", "slurm-time-limit", "job-preempted-sigterm")),
    -11: ExitCode("SIGSEGV", "SIGSEGV, a crash in native code", "a segmentation fault in native code",
                  "segmentation-fault", True),
    -15: ExitCode("SIGTERM", "SIGTERM: asked to stop",
                  "asked to stop: preemption, a time limit, or the launcher stopping siblings", "job-preempted-sigterm",
                  False, ("job-preempted-sigterm", "slurm-time-limit")),
    137: ExitCode("SIGKILL", "exit status 137 (128+9, SIGKILL): killed from outside",
                  "exit status 137 is 128+9: killed by SIGKILL, most often the OOM killer", "host-oom-killed", False,
                  ("host-oom-killed", "slurm-time-limit", "job-preempted-sigterm")),
    139: ExitCode("SIGSEGV", "exit status 139 (128+11, SIGSEGV)", "exit status 139 is 128+11: a segmentation fault",
                  "segmentation-fault", True),
    143: ExitCode("SIGTERM", "exit status 143 (128+15, SIGTERM): asked to stop",
                  "exit status 143 is 128+15: asked to stop (preemption, a time limit, the launcher)",
                  "job-preempted-sigterm", False, ("job-preempted-sigterm", "slurm-time-limit")),
}
