"""Checks over the knowledge base, each a small class registered by name.

Entry checks see one loaded entry at a time; knowledge-base checks see them all and run after the entry
checks, like pySigma's validators. `run_checks` runs every registered check, or the ones named.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ..loader import KnowledgeBase, Loaded
from ..problems import Problem


class Check:
    name: str = ""
    code: str = ""
    description: str = ""

    def problem(self, loaded: Loaded, loc: tuple[object, ...], message: str, offset: int = 0) -> Problem:
        line, col = loaded.where(*loc)
        return Problem(loaded.display, line, col + offset, self.code, self.name, message)


class EntryCheck(Check):
    def check(self, loaded: Loaded, kb: KnowledgeBase) -> Iterable[Problem]:
        raise NotImplementedError


class KbCheck(Check):
    def check_kb(self, kb: KnowledgeBase) -> Iterable[Problem]:
        raise NotImplementedError


REGISTRY: dict[str, type[Check]] = {}


def register(cls: type[Check]) -> type[Check]:
    if cls.name in REGISTRY:
        raise ValueError(f"check {cls.name!r} registered twice")
    REGISTRY[cls.name] = cls
    return cls


def run_checks(kb: KnowledgeBase, names: Iterable[str] | None = None) -> list[Problem]:
    from . import entry_checks, kb_checks  # noqa: F401  (registration)

    selected = [REGISTRY[n]() for n in (names or REGISTRY)]
    problems: list[Problem] = list(kb.problems)
    for check in selected:
        if isinstance(check, EntryCheck):
            for loaded in kb.files.values():
                problems.extend(check.check(loaded, kb))
    for check in selected:
        if isinstance(check, KbCheck):
            problems.extend(check.check_kb(kb))
    return sorted(set(problems), key=lambda p: (p.path, p.line, p.col, p.code, p.message))


def iter_checks() -> Iterator[type[Check]]:
    from . import entry_checks, kb_checks  # noqa: F401

    yield from REGISTRY.values()
