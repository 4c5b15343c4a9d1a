"""Three log mixes for the scan benchmark, built from real text: healthy training output with NCCL_DEBUG=INFO,
the same with 1% of lines errors and warnings, and a 64-rank watchdog storm.

Healthy lines are the shapes make_log.py prints plus every line of the benign corpus (tests/corpus/benign/:
NCCL INFO init, channel, ring and tree lines, DeepSpeed config dumps, c10d debug lines, warnings), given rank
and host prefixes the way torchrun and srun print them. Failure lines are the knowledge base's own examples.
The storm block is what each rank prints on a collective timeout, from public threads (vllm-project/vllm#6042
for the ProcessGroupNCCL lines, sgl-project/sglang#1693 for the C++ stack), then torchrun's summary.

    python benchmarks/mixes.py OUT_DIR --mb 1024     # writes healthy.log, errors.log, storm.log
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from make_log import HEALTHY, failure_lines

ROOT = Path(__file__).resolve().parent.parent
MIXES = ("healthy", "errors", "storm")
RANKS = 64

STORM = """\
[rank{r}]:[E ProcessGroupNCCL.cpp:563] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=158046, OpType=GATHER, NumelIn=2867200, NumelOut=0, Timeout(ms)=600000) ran for 600027 milliseconds before timing out.
[rank{r}]:[E ProcessGroupNCCL.cpp:1537] [PG 1 Rank {r}] Timeout at NCCL work: 158046, last enqueued NCCL work: 158046, last completed NCCL work: 158045.
[rank{r}]:[E ProcessGroupNCCL.cpp:577] [Rank {r}] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.
[rank{r}]:[E ProcessGroupNCCL.cpp:583] [Rank {r}] To avoid data inconsistency, we are taking the entire process down.
[rank{r}]:[E ProcessGroupNCCL.cpp:1414] [PG 1 Rank {r}] Process group watchdog thread terminated with exception: [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=158046, OpType=GATHER, NumelIn=2867200, NumelOut=0, Timeout(ms)=600000) ran for 600027 milliseconds before timing out.
[rank{r}]:Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:565 (most recent call first):
[rank{r}]:frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, std::ratio<1l, 1000l> > >) + 0x1d2 (0x7f3b6e71a8d2 in /usr/local/lib/python3.10/dist-packages/torch/lib/libtorch_cuda.so)
[rank{r}]:frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0x233 (0x7f3b6e721313 in /usr/local/lib/python3.10/dist-packages/torch/lib/libtorch_cuda.so)
[rank{r}]:frame #3: c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x10c (0x7f3b6e7236fc in /usr/local/lib/python3.10/dist-packages/torch/lib/libtorch_cuda.so)
[rank{r}]:frame #4: <unknown function> + 0xd6df4 (0x7f3bca9d5df4 in /usr/lib/x86_64-linux-gnu/libstdc++.so.6)
[rank{r}]:frame #5: <unknown function> + 0x8609 (0x7f3c74f76609 in /usr/lib/x86_64-linux-gnu/libpthread.so.0)
[rank{r}]:frame #6: clone + 0x43 (0x7f3c750b0353 in /usr/lib/x86_64-linux-gnu/libc.so.6)
"""

SUMMARY = """\
E1206 18:44:16.994000 140234 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -6) local_rank: {r} (pid: {pid}) of binary: /usr/bin/python
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-12-06_18:44:17
  host      : node{n}
  rank      : {r} (local_rank: {lr})
  exitcode  : -6 (pid: {pid})
  error_file: <N/A>
  traceback : Signal 6 (SIGABRT) received by PID {pid}
============================================================
""".replace("ChildFailedError:\n", "ChildFailedError: \n")  # torchrun prints a space after the colon


def benign_lines(root: Path = ROOT) -> tuple[list[str], list[str], list[str]]:
    """The benign corpus: NCCL INFO lines, warnings, and everything else, comments left out."""
    nccl, warnings, other = [], [], []
    for path in sorted((root / "tests" / "corpus" / "benign").glob("*.log")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip() or line.startswith("#"):
                continue
            if "NCCL INFO" in line:
                nccl.append(line)
            elif "WARN" in line or "Warning" in line or "warning" in line:
                warnings.append(line)
            else:
                other.append(line)
    return nccl, warnings, other


class _Healthy:
    """Healthy lines: a sixth NCCL INFO (as in a multi-node NCCL_DEBUG=INFO log), the rest training output."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.nccl, self.warnings, self.other = benign_lines()
        self.n = 0

    def prefix(self) -> str:
        r = self.rng.randrange(RANKS)
        return f"[rank{r}]:" if self.rng.random() < 0.5 else f"{r}: "

    def line(self) -> str:
        self.n += 1
        n, rng = self.n, self.rng
        pick = rng.random()
        if pick < 1 / 6:
            return self.prefix() + rng.choice(self.nccl)
        if pick < 0.22:
            return self.prefix() + rng.choice(self.other)
        tpl = HEALTHY[n % len(HEALTHY)]
        return tpl.format(r=n % RANKS, loss=rng.random() * 3, g=rng.random(), e=n / 1e6, s=n, t=12000 + n % 999,
                          m=n % 60, sec=n % 60, p=n % 100, pid=10000 + n % 8)


def write_mix(out: Path, mix: str, size_mb: int, seed: int = 11) -> int:
    """Write one mix of about `size_mb` MiB to `out`; returns the bytes written."""
    rng = random.Random(seed)
    healthy = _Healthy(rng)
    failures = failure_lines(ROOT / "kb")
    target = size_mb << 20
    written = 0
    with out.open("w", encoding="utf-8") as fh:
        while written < target:
            block = [healthy.line() for _ in range(10_000)]
            if mix == "errors":  # 1% of lines: half warnings, half failure lines
                for _ in range(100):
                    text = rng.choice(failures) if rng.random() < 0.5 else rng.choice(healthy.warnings)
                    block.insert(rng.randrange(len(block)), healthy.prefix() + text)
            elif mix == "storm":  # about 1% of lines: each of 64 ranks prints its timeout and stack (12 lines)
                for r in rng.sample(range(RANKS), 8):
                    at = rng.randrange(len(block))
                    block[at:at] = STORM.format(r=r).splitlines()
                block.extend(SUMMARY.format(r=rng.randrange(RANKS), lr=rng.randrange(8), n=rng.randrange(8),
                                            pid=20000 + rng.randrange(9999)).splitlines())
            text = "\n".join(block) + "\n"
            fh.write(text)
            written += len(text.encode("utf-8"))
    return written


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--mb", type=int, default=1024)
    parser.add_argument("--mix", choices=MIXES, action="append")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for mix in args.mix or MIXES:
        print(mix, write_mix(args.out / f"{mix}.log", mix, args.mb))
