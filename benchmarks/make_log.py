"""Write a synthetic multi-rank training log: mostly healthy lines, a few real failure lines.

The failure lines are taken from the knowledge base's own examples, so they are real output; the healthy
lines imitate what torchrun and a training loop print.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from ruamel.yaml import YAML

HEALTHY = [
    "[rank{r}]: {{'loss': {loss:.4f}, 'grad_norm': {g:.3f}, 'learning_rate': 2e-05, 'epoch': {e:.2f}}}",
    "[rank{r}]: step {s} | loss {loss:.4f} | tokens/s {t} | mem 61.2 GiB | lr 3.0e-4",
    "[rank{r}]: [2024-05-01 10:{m:02d}:{sec:02d},123] [INFO] [logging.py:96:log_dist] [Rank {r}] step={s}, skipped=0, lr=[0.0003], mom=[(0.9, 0.95)]",
    "[rank{r}]: {p:3d}%|#####     | {s}/100000 [01:{m:02d}<10:00,  3.21it/s]",
    "[rank{r}]: node7:{pid}:{pid} [{r}] NCCL INFO comm 0x5581c0 rank {r} nranks 8 cudaDev {r} busId 1b000 - Init COMPLETE",
]


def failure_lines(kb: Path) -> list[str]:
    lines = []
    for path in sorted(kb.glob("*.yaml")):
        if path.name.startswith("_"):
            continue
        data = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
        examples = (data.get("examples") or {}).get("match") or []
        if examples:
            lines.append(examples[0]["text"].splitlines()[-1])
    return lines


def write(out: Path, size_mb: int, kb: Path, seed: int = 7) -> int:
    rng = random.Random(seed)
    failures = failure_lines(kb)
    target = size_mb << 20
    written = 0
    n = 0
    with out.open("w", encoding="utf-8") as fh:
        while written < target:
            block = []
            for _ in range(10_000):
                n += 1
                tpl = HEALTHY[n % len(HEALTHY)]
                block.append(tpl.format(r=n % 8, loss=rng.random() * 3, g=rng.random(), e=n / 1e6, s=n, t=12000 + n % 999,
                                        m=n % 60, sec=n % 60, p=n % 100, pid=10000 + n % 8))
            if rng.random() < 0.05:
                block.insert(rng.randrange(len(block)), f"[rank{rng.randrange(8)}]: " + rng.choice(failures))
            text = "\n".join(block) + "\n"
            fh.write(text)
            written += len(text.encode("utf-8"))
    return written


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--mb", type=int, default=1024)
    parser.add_argument("--kb", type=Path, default=Path(__file__).resolve().parent.parent / "kb")
    args = parser.parse_args()
    print(write(args.out, args.mb, args.kb))
