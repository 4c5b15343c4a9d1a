"""The versions a log says it ran with, and what they mean for an entry's `conditions.versions`.

Training logs print their versions in a few fixed places: NCCL's `NCCL version 2.21.5+cuda12.4` (its INFO banner,
and the tail of every NCCL error PyTorch raises), DeepSpeed's `DeepSpeed info: version=...` banner, and the
environment reports people paste into issues (`python -m torch.utils.collect_env`, `ds_report`,
`transformers env`, `accelerate env`, `nvidia-smi`'s header). Each is one named pattern, copied from the
program that prints it. `match` and `scan` read them from the text (or from `--env FILE`) and compare them with
the entry's affected versions: an answer is never dropped for a version, only demoted and explained.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import NamedTuple

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version


class VersionPattern(NamedTuple):
    name: str  # what prints it
    package: str  # the package name in `conditions.versions` (PEP 503 normalised)
    marker: str  # a literal every such line contains (for scan's prefilter)
    regex: re.Pattern[str]  # group "v": the version


_V = r"(?P<v>\d+(?:\.\d+)+(?:[.+-]?[A-Za-z0-9]+)*)"

PATTERNS: tuple[VersionPattern, ...] = (
    # NVIDIA/nccl src/init.cc VERSION_STRING ("NCCL version 2.30.7+cuda13.0"), and PyTorch's NCCL errors, which
    # end in ", NCCL version 2.21.5" (c10d getNcclErrorDetailStr / ncclGetErrorWithVersion).
    VersionPattern("nccl", "nccl", "NCCL version ", re.compile(r"\bNCCL version " + _V)),
    # deepspeed/__init__.py: log_dist("DeepSpeed info: version={}, git-hash={}, git-branch={}")
    VersionPattern("deepspeed banner", "deepspeed", "DeepSpeed info: version=",
                   re.compile(r"DeepSpeed info: version=" + _V)),
    # deepspeed/env_report.py (ds_report): print(name, "." * n, value) for "deepspeed info" and "torch version"
    VersionPattern("ds_report", "deepspeed", "deepspeed info ", re.compile(r"\bdeepspeed info \.+ " + _V)),
    VersionPattern("ds_report", "torch", "torch version ", re.compile(r"\btorch version \.+ " + _V)),
    # torch/utils/collect_env.py: "PyTorch version: {torch_version}", "Nvidia driver version: {...}",
    # and "[pip3] name==version" for the packages it lists
    VersionPattern("collect_env", "torch", "PyTorch version: ", re.compile(r"^PyTorch version: " + _V)),
    VersionPattern("collect_env", "driver", "Nvidia driver version: ",
                   re.compile(r"^Nvidia driver version: " + _V)),
    # transformers env: "- `transformers` version: 4.46.3", "- PyTorch version (GPU?): 2.4.0+cu121 (True)",
    # "- Accelerate version: 0.34.2", "- Huggingface_hub version: 0.25.1"; accelerate env: "- `Accelerate` version:"
    VersionPattern("transformers env", "transformers", "`transformers` version: ",
                   re.compile(r"`transformers` version: " + _V)),
    VersionPattern("transformers env", "torch", "PyTorch version (GPU?): ",
                   re.compile(r"PyTorch version \(GPU\?\): " + _V)),
    VersionPattern("transformers env", "accelerate", "Accelerate version: ",
                   re.compile(r"- Accelerate version: " + _V)),
    VersionPattern("accelerate env", "accelerate", "`Accelerate` version: ",
                   re.compile(r"`Accelerate` version: " + _V)),
    VersionPattern("transformers env", "huggingface-hub", "Huggingface_hub version: ",
                   re.compile(r"Huggingface_hub version: " + _V)),
    # nvidia-smi's header: "| NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2 |"
    VersionPattern("nvidia-smi", "driver", "Driver Version: ", re.compile(r"\bDriver Version: " + _V)),
)
_PIP = re.compile(r"^\[(?:pip3?|conda)\] (?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?:==| +)" + _V)
# pip distributions whose version is another package's: NCCL ships as nvidia-nccl-cu12.
_DISTRIBUTIONS = {re.compile(r"^nvidia-nccl(?:-cu\d+)?$"): "nccl"}
MARKERS: tuple[str, ...] = tuple(sorted({p.marker for p in PATTERNS} | {"[pip3] ", "[pip] ", "[conda] "}))


def canonical(package: str) -> str:
    """PEP 503's normal form: `huggingface_hub` and `Huggingface-Hub` are one package."""
    name = re.sub(r"[-_.]+", "-", package).lower()
    return next((target for pattern, target in _DISTRIBUTIONS.items() if pattern.match(name)), name)


def read_line(text: str) -> tuple[str, str] | None:
    """(package, version) if this line (prefixes stripped) says which version of a package runs."""
    if not any(marker in text for marker in MARKERS):
        return None
    for pattern in PATTERNS:
        m = pattern.regex.search(text)
        if m:
            return pattern.package, m.group("v")
    m = _PIP.match(text)
    return (canonical(m.group("name")), m.group("v")) if m else None


def read_versions(lines: Iterable[str]) -> dict[str, str]:
    """Every package version the lines print; the first one seen per package wins (a job's own banner comes
    before anything it reports about a peer)."""
    from .normalize import strip_prefixes

    seen: dict[str, str] = {}
    for raw in lines:
        found = read_line(strip_prefixes(raw).text)
        if found is not None:
            seen.setdefault(*found)
    return seen


class Assessment(NamedTuple):
    notes: tuple[str, ...]  # one sentence per package the log and the entry both name
    outside: bool  # some version the log names is outside the entry's affected range: demote, do not drop


def _upper(spec: SpecifierSet) -> str | None:
    bounds = [s.version for s in spec if s.operator == "<"]
    return min(bounds, key=Version) if bounds else None


def _compared(specs: Mapping[str, str], seen: Mapping[str, str]) -> Iterator[tuple[str, str, str, SpecifierSet, bool]]:
    """(package, its version in the log, the specifier text, the specifier, whether it holds) for each package
    that both name, skipping what does not parse. Container builds name a release's development snapshot (NGC's
    torch 2.6.0a0+git...): compared as the release they lead to, not as older than every 2.6 bound."""
    running = {canonical(k): v for k, v in seen.items()}
    for package, spec_text in sorted(specs.items()):
        have = running.get(canonical(package))
        if have is None:
            continue
        try:
            spec, version = SpecifierSet(spec_text), Version(have)
        except (InvalidSpecifier, InvalidVersion):
            continue
        yield package, have, spec_text, spec, spec.contains(Version(version.base_version), prereleases=True)


def assess(conditions: Mapping[str, str], seen: Mapping[str, str]) -> Assessment:
    """What the versions a log names say about an entry whose affected versions are `conditions`."""
    notes: list[str] = []
    outside = False
    for package, have, spec_text, spec, inside in _compared(conditions, seen):
        if inside:
            upper = _upper(spec)
            later = f"; {package} {upper} and later are outside it" if upper else ""
            notes.append(f"your {package} {have} is in the affected range ({spec_text}){later}")
        else:
            outside = True
            notes.append(f"your {package} {have} is outside the affected range ({spec_text}): "
                         "check the entry's checklist before acting on it")
    return Assessment(tuple(notes), outside)


def printed_by_other(printed_by: Mapping[str, str], seen: Mapping[str, str]) -> tuple[str, ...]:
    """Notes for a matched wording that the versions the log names do not print: the line comes from another
    release than the one reported (a second installation, a container's own library), worth a look."""
    return tuple(
        f"your {package} {have} does not print this wording ({package} {spec_text} does): the line may come from "
        f"another {package} than the one reported"
        for package, have, spec_text, _spec, inside in _compared(printed_by, seen) if not inside
    )
