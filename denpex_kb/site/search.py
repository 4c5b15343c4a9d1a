"""The hub's search index, weighted for pasted error lines.

mkdocs-material's search ranks a page by its words with three field weights: a section title 1,000 times a word
of text, and a page tag 1,000,000 times. On this site every section of an entry carries the entry's tags and
short titles, so a pasted line's common words ("to", "out", "fault") decide the order through tags and titles
("tokenizer", "hardware-fault"), and the entry whose text holds the whole line falls to the second screen. The
index is rewritten after the build: tags and titles weigh as much as a few words of text, and the sections that
hold what the software prints (what you see, the signatures, the real output) weigh more than the prose; the
benign look-alikes ("not this failure") and the phase tables, which quote every entry's line, weigh less.

Zensical's index (`search.json`, cleaned by clean.py) has nothing to reweigh: as of Zensical 0.0.73 it holds
only the language, the separator and the documents (location, level, title, text, path, tags), and its search
worker fixes the field weights in its own code (title 3, path 2, text 1; tags filter, they do not rank) and
reads no weight or boost from the index, per field or per document.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

INDEX = Path("search") / "search_index.json"

FIELD_BOOST = {"title": 5.0, "text": 1.0, "tags": 2.0}
# Section anchors of an entry page (site/render.py) and how much more (or less) they weigh than plain text.
SECTION_BOOST = {"what-you-see": 4.0, "signatures": 4.0, "real-output": 3.0, "not-this-failure": 0.3}
LISTING_BOOST = 0.5  # pages that list entries with their lines: the phases, all entries, the home page


def _boost(location: str) -> float | None:
    page, _, anchor = location.partition("#")
    if page.startswith("entries/") and page.count("/") == 2:
        return SECTION_BOOST.get(anchor)
    if page in ("", "entries/") or page.startswith("phases/"):
        return LISTING_BOOST
    return None


def weigh(index: dict[str, Any]) -> dict[str, Any]:
    """The index with the field and section weights above (the same docs, in the same order)."""
    fields = index.get("config", {}).get("fields", {})
    for name, boost in FIELD_BOOST.items():
        if name in fields:
            fields[name]["boost"] = boost
    for doc in index.get("docs", []):
        weight = _boost(str(doc.get("location", "")))
        if weight is not None:
            doc["boost"] = weight
    return index


def weigh_site(site: Path) -> None:
    path = site / INDEX
    if path.is_file():
        index = json.loads(path.read_text(encoding="utf-8"))
        path.write_text(json.dumps(weigh(index), ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
