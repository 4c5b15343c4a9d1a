"""Compiling the validated knowledge base into the bundle that ships inside the package.

The bundle has two files: `index.json`, everything the matcher needs (ids, titles, phases, compiled patterns
and anchors, one-line fixes), small enough to load in a few milliseconds; and `entries.json`, the full entries,
read only when a command needs the prose (explain, the fix and commands in a scan report).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from .bundle import BUNDLE_FORMAT, ENTRIES_FILE, INDEX_FILE, anchor_keys
from .loader import KnowledgeBase
from .model import CommandPurpose, Entry, Signature
from .signatures import compile_signature

__all__ = ["BUNDLE_FORMAT", "ENTRIES_FILE", "INDEX_FILE", "compile_kb", "dumps", "write_bundle"]


def _verify_commands(entry: Entry) -> list[str]:
    return [c.run for c in entry.commands if c.purpose is CommandPurpose.verify]


def compile_kb(kb: KnowledgeBase) -> tuple[dict[str, Any], dict[str, Any]]:
    """Return (index, entries) as JSON-ready objects. The knowledge base must have passed `check`."""
    entries: list[dict[str, Any]] = []
    signatures: list[list[Any]] = []
    fingerprints: list[list[Any]] = []
    for i, entry_id in enumerate(sorted(kb.entries)):
        entry = kb.entries[entry_id]
        entries.append(
            {
                "id": entry.id,
                "title": entry.title,
                "phase": entry.phase.value,
                "severity": entry.severity.value,
                "status": entry.status,
                "tags": list(entry.tags),
                "fix": entry.fix.summary,
                "verify": _verify_commands(entry),
                **(
                    {"retry": entry.response.retry.value, "blame": entry.response.blame.value,
                     "response_note": entry.response.note}
                    if entry.response else {}
                ),
            }
        )
        for j, sig in enumerate(entry.signatures):
            compiled = compile_signature(sig)
            signatures.append(
                [i, j, compiled.pattern, list(compiled.anchors), compiled.specificity, sig.role.value, sig.stream.value]
            )
        if entry.fingerprint:
            events = [compile_signature(Signature(kind=ev.kind, text=ev.text)) for ev in entry.fingerprint.events]
            fingerprints.append([i, entry.fingerprint.within_lines, [[c.pattern, list(c.anchors)] for c in events]])
    for row, keys in zip(signatures, anchor_keys([s[3] for s in signatures]), strict=True):
        row.append(keys)
    full = {
        entry_id: kb.entries[entry_id].model_dump(mode="json", exclude_none=True) for entry_id in sorted(kb.entries)
    }
    tombstones = {k: v.replaced_by for k, v in sorted(kb.tombstones.items())}
    digest = hashlib.sha256(json.dumps([full, tombstones], sort_keys=True).encode()).hexdigest()
    index = {
        "format": BUNDLE_FORMAT,
        "digest": digest,
        "entries": entries,
        "signatures": signatures,
        "fingerprints": fingerprints,
        "tombstones": tombstones,
    }
    return index, {"format": BUNDLE_FORMAT, "digest": digest, "entries": full}


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n"


def write_bundle(kb: KnowledgeBase, out_dir: Path) -> list[Path]:
    index, full = compile_kb(kb)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, obj in ((INDEX_FILE, index), (ENTRIES_FILE, full)):
        path = out_dir / name
        tmp = path.with_suffix(".tmp")
        tmp.write_text(dumps(obj), encoding="utf-8")
        tmp.replace(path)
        written.append(path)
    return written
