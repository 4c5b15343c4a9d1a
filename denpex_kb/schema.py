"""The JSON Schema of an entry file, exported from the model (the committed copy lives in `schema/`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from .model import Entry, Tombstone
from .urls import SCHEMA_ID


def entry_schema(tags: list[str] | None = None) -> dict[str, Any]:
    schema = TypeAdapter(Entry | Tombstone).json_schema(mode="validation")
    if tags:
        # Editors then complete and check tags against kb/_tags.yaml while typing.
        schema["$defs"]["Entry"]["properties"]["tags"]["items"] = {"enum": sorted(tags), "type": "string"}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "denpex-kb failure entry",
        **schema,
    }


def render(tags: list[str] | None = None) -> str:
    return json.dumps(entry_schema(tags), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def vocabulary_tags(kb_dir: Path) -> list[str]:
    from .loader import KnowledgeBase, _load_tags

    kb = KnowledgeBase(root=kb_dir)
    _load_tags(kb_dir, kb)
    return sorted(kb.tag_group)
