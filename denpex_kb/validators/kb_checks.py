"""Checks that span entries; they run after every entry check."""

from __future__ import annotations

from collections.abc import Iterable

from ..loader import KnowledgeBase
from ..model import Entry
from ..problems import Problem
from . import KbCheck, register


@register
class RelatedExist(KbCheck):
    name = "related"
    code = "DKB102"
    description = "Every `related` id names an entry of the knowledge base."

    def check_kb(self, kb: KnowledgeBase) -> Iterable[Problem]:
        for entry_id, loaded in kb.files.items():
            entry = loaded.entry
            if not isinstance(entry, Entry):
                continue
            for i, rel in enumerate(entry.related):
                if rel.id in kb.tombstones:
                    target = kb.tombstones[rel.id].replaced_by
                    hint = f"link {target!r} instead" if target else "remove the link"
                    line, col = loaded.where("related", i, "id")
                    yield Problem(loaded.display, line, col, self.code, self.name, f"related entry {rel.id!r} was retired; {hint}")
                elif rel.id not in kb.entries:
                    line, col = loaded.where("related", i, "id")
                    yield Problem(loaded.display, line, col, self.code, self.name, f"related entry {rel.id!r} does not exist; fix the id or remove the link")


@register
class ReplacementsExist(KbCheck):
    name = "replaced-by"
    code = "DKB107"
    description = "A retired id points at an entry that exists and is not itself retired."

    def check_kb(self, kb: KnowledgeBase) -> Iterable[Problem]:
        for entry_id, stone in kb.tombstones.items():
            target = stone.replaced_by
            if target and target not in kb.entries:
                loaded = kb.files[entry_id]
                line, col = loaded.where("replaced_by")
                why = "is retired too; point at its replacement" if target in kb.tombstones else "does not exist"
                yield Problem(loaded.display, line, col, self.code, self.name, f"replaced_by {target!r} {why}")
