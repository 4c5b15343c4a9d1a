"""Every address the project prints: the hub, the repository, where to report a missing failure.

One place, so a fork or a mirror changes them once; the hub's base honours DENPEX_KB_HUB_URL at run time (a
hub built and served elsewhere), while files committed to the repository use the published one.
"""

from __future__ import annotations

import os

HUB = "https://denpex-kb.github.io/denpex-kb/"  # the published hub
REPO = "https://github.com/denpex-kb/denpex-kb"
REPORT_MISSING = f"{REPO}/issues/new?template=missing-failure.yml"
SCHEMA_ID = f"{HUB}schema/entry.schema.json"


def hub_url() -> str:
    """The hub's base URL, ending in `/`: DENPEX_KB_HUB_URL if set, else the published hub."""
    base = os.environ.get("DENPEX_KB_HUB_URL", HUB)
    return base if base.endswith("/") else base + "/"


def entry_url(entry_id: str) -> str:
    return f"{hub_url()}entries/{entry_id}/"
