"""Whether any third-party pack may be installed, answered without importing `packs` (pathlib, hashlib and the
compiler stay unloaded on a machine that has none, which is almost every machine `match` starts on)."""

from __future__ import annotations

import os
import sys

GROUP = "denpex_kb.packs"
DISABLE_ENV = "DENPEX_KB_NO_PACKS"  # set (to anything but "" or "0") to ignore installed packs


def disabled() -> bool:
    return os.environ.get(DISABLE_ENV, "") not in ("", "0")


def may_declare_packs() -> bool:
    """Whether any distribution on sys.path may declare the group: each dist-info's entry_points.txt read plainly
    (about a millisecond), so that a machine without packs does not pay at every start for importlib.metadata,
    which parses every installed distribution (tens to hundreds of milliseconds in a large environment). Only
    a yes is checked properly; whatever this cannot read plainly (a zip on sys.path, a finder of its own) is a
    yes."""
    from importlib.machinery import PathFinder

    if any(hasattr(f, "find_distributions") and f is not PathFinder for f in sys.meta_path):
        return True
    needle = GROUP.encode()
    for entry in sys.path:
        try:
            listing = os.scandir(entry or ".")
        except NotADirectoryError:
            return True
        except OSError:  # not there: nothing is installed there
            continue
        with listing:
            for item in listing:
                if not item.name.endswith((".dist-info", ".egg-info")):
                    continue
                try:
                    with open(os.path.join(item.path, "entry_points.txt"), "rb") as fh:
                        if needle in fh.read():
                            return True
                except FileNotFoundError:
                    continue
                except OSError:
                    return True
    return False
