"""`denpex-kb recipe`: the shipped recipes that wire `scan --exit-by-verdict` into launchers and schedulers."""

from __future__ import annotations

import argparse
import sys
from importlib import resources

from ..cli import UsageError
from ._common import did_you_mean

ORDER = 25


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("recipe", help="print a recipe that acts on scan's verdict (Slurm, SkyPilot, Kubernetes, a retry loop)")
    p.add_argument("name", nargs="?", metavar="NAME", help="the recipe to print; none lists them")
    p.set_defaults(handler=run)


def recipes() -> dict[str, str]:
    folder = resources.files("denpex_kb").joinpath("recipes")
    return {item.name: item.read_text(encoding="utf-8") for item in sorted(folder.iterdir(), key=lambda i: i.name)
            if item.name.endswith((".sh", ".yaml"))}


def _summary(text: str) -> str:
    for line in text.splitlines():
        line = line.lstrip("# ").strip()
        if line and not line.startswith("!"):
            return line
    return ""


def run(args: argparse.Namespace) -> int:
    found = recipes()
    if not args.name:
        width = max(len(n) for n in found)
        for name, text in found.items():
            print(f"{name:<{width}}  {_summary(text)}")
        return 0
    if args.name not in found:
        listed = "; `denpex-kb recipe` lists them: " + ", ".join(found)
        raise UsageError(f"no recipe {args.name!r}{did_you_mean(args.name, list(found)) or listed}")
    sys.stdout.write(found[args.name])
    return 0
