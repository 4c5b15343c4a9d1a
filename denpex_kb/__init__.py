"""denpex-kb: name the failure behind an ML training error, and how to fix it.

    >>> import denpex_kb
    >>> denpex_kb.match("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB.")[0].id
    'cuda-out-of-memory'

`match(text)` ranks the entries a line or pasted block shows; `scan(source)` reads a whole log and reports the
initiating failure and its collateral. Both run locally on the knowledge base bundled in the package.
"""

from __future__ import annotations

__version__ = "0.2.0"

from typing import TYPE_CHECKING, Any

from .bundle import KbIndex, default_index, load_bundle_dir
from .matcher import Match, match

if TYPE_CHECKING:
    from .compiler import index_from_kb_dir
    from .scanner import Finding, ScanError, ScanReport, scan, scan_many

_LAZY = {"Finding", "ScanError", "ScanReport", "scan", "scan_many"}


def __getattr__(name: str) -> Any:
    # The scanner (threads, processes, gzip) and the compiler (the loader, the model) load on first use, so a
    # one-line `match` starts faster.
    if name in _LAZY:
        from . import scanner

        return getattr(scanner, name)
    if name == "index_from_kb_dir":
        from .compiler import index_from_kb_dir

        return index_from_kb_dir
    raise AttributeError(f"module 'denpex_kb' has no attribute {name!r}")

__all__ = [
    "Finding",
    "KbIndex",
    "Match",
    "ScanError",
    "ScanReport",
    "__version__",
    "default_index",
    "index_from_kb_dir",
    "load_bundle_dir",
    "match",
    "scan",
    "scan_many",
]
