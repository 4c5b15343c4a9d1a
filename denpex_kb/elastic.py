"""TorchElastic error files: what `@record` writes when a rank's main function raises.

`torch.distributed.elastic.multiprocessing.errors.record` catches the exception and writes
`{"message": {"message": "<Type>: <text>", "extraInfo": {"py_callstack": "<traceback>", "timestamp": "..."}}}`
to the path in TORCHELASTIC_ERROR_FILE (with `torchrun --log-dir`, `<run>/attempt_<n>/<local rank>/error.json`);
the agent's summary then names the file. It is the failing rank's own account of its exception, so `scan`
treats it as the strongest evidence of the initiating failure.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

ERROR_FILE = "error.json"
MAX_ERROR_FILE = 8 << 20  # an error file holds one traceback: anything bigger is not one


def is_error_file(path: str | os.PathLike[str]) -> bool:
    return Path(path).name == ERROR_FILE


def read_error_file(path: str | os.PathLike[str]) -> list[str] | None:
    """The lines an error file reports (the traceback, ending in the exception line), or None when the file is
    not a TorchElastic error file (unreadable, too big, not that JSON shape)."""
    try:
        if os.path.getsize(path) > MAX_ERROR_FILE:
            return None
        data = json.loads(Path(path).read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return None
    message = data.get("message") if isinstance(data, dict) else None
    if isinstance(message, str):  # the agent's own form for a failure it could not attribute
        return [message]
    if not isinstance(message, dict) or not isinstance(message.get("message"), str):
        return None
    extra = message.get("extraInfo")
    stack = extra.get("py_callstack") if isinstance(extra, dict) else None
    lines = str(stack).splitlines() if isinstance(stack, str) and stack.strip() else []
    last = message["message"].splitlines()[0] if message["message"].strip() else ""
    if last and (not lines or lines[-1].strip() != last.strip()):
        lines.append(last)
    return lines or None


def beside(paths: list[str]) -> list[str]:
    """Error files next to per-rank logs (`attempt_<n>/<rank>/stderr.log` -> `.../<rank>/error.json`) that
    were not given themselves."""
    given = {os.path.abspath(p) for p in paths}
    found: list[str] = []
    for p in paths:
        candidate = os.path.join(os.path.dirname(p), ERROR_FILE)
        if os.path.abspath(candidate) not in given and candidate not in found and os.path.isfile(candidate):
            found.append(candidate)
    return found
