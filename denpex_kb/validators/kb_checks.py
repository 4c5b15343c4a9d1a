"""Checks that span entries; they run after every entry check."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from ..loader import KnowledgeBase
from ..model import Entry, Relation
from ..problems import Problem
from . import KbCheck, register


@register
class RelatedExist(KbCheck):
    code = "DKB102"

    def check_kb(self, kb: KnowledgeBase) -> Iterable[Problem]:
        for loaded in kb.files.values():
            entry = loaded.entry
            if not isinstance(entry, Entry):
                continue
            for i, rel in enumerate(entry.related):
                if rel.id in kb.tombstones:
                    target = kb.tombstones[rel.id].replaced_by
                    hint = f"link {target!r} instead" if target else "remove the link"
                    yield self.problem(loaded, ("related", i, "id"), f"related entry {rel.id!r} was retired; {hint}")
                elif rel.id not in kb.entries:
                    yield self.problem(loaded, ("related", i, "id"), f"related entry {rel.id!r} does not exist; fix the id or remove the link")


@register
class ReplacementsExist(KbCheck):
    code = "DKB107"

    def check_kb(self, kb: KnowledgeBase) -> Iterable[Problem]:
        for entry_id, stone in kb.tombstones.items():
            target = stone.replaced_by
            if target and target not in kb.entries:
                loaded = kb.files[entry_id]
                why = "is retired too; point at its replacement" if target in kb.tombstones else "does not exist"
                yield self.problem(loaded, ("replaced_by",), f"replaced_by {target!r} {why}")


@register
class CollateralAcyclic(KbCheck):
    code = "DKB109"

    def check_kb(self, kb: KnowledgeBase) -> Iterable[Problem]:
        edges: dict[str, list[tuple[int, str]]] = {}
        for entry_id, loaded in kb.files.items():
            entry = loaded.entry
            if isinstance(entry, Entry):
                edges[entry_id] = [
                    (i, rel.id) for i, rel in enumerate(entry.related)
                    if rel.relation is Relation.collateral_of and rel.id in kb.entries and rel.id != entry_id
                ]  # self links are the related-self check's, unknown ids the related check's

        def path(start: str, goal: str) -> list[str] | None:
            """The shortest chain of collateral-of links from start to goal (breadth first), or None."""
            came: dict[str, str | None] = {start: None}
            queue = deque([start])
            while queue:
                node = queue.popleft()
                if node == goal:
                    chain = [node]
                    while came[chain[-1]] is not None:
                        chain.append(came[chain[-1]])  # type: ignore[arg-type]
                    return chain[::-1]
                for _, nxt in edges.get(node, []):
                    if nxt not in came:
                        came[nxt] = node
                        queue.append(nxt)
            return None

        for entry_id, links in edges.items():
            loaded = kb.files[entry_id]
            for i, target in links:
                back = path(target, entry_id)
                if back is None:
                    continue
                cycle = " -> ".join([entry_id, *back])
                yield self.problem(
                    loaded, ("related", i),
                    f"collateral-of links form a cycle ({cycle}), so no entry in it is the root cause; keep the link that "
                    "points at the root cause and remove the others or make them `sibling`",
                )
