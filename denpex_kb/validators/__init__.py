"""Checks over the knowledge base, each a small class registered under its code.

Entry checks see one loaded entry at a time; knowledge-base checks see them all and run after the entry
checks, like pySigma's validators. A check names only its code: its name, description and severity are the
code's row in the code table (denpex_kb/codes.py), filled in by `register`. `run_checks` runs every registered
check, or the ones named.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import ClassVar

from ..codes import lookup
from ..loader import KnowledgeBase, Loaded
from ..problems import Problem


class Check:
    code: ClassVar[str] = ""
    name: ClassVar[str] = ""  # from the code table
    description: ClassVar[str] = ""  # from the code table

    def problem(self, loaded: Loaded, loc: tuple[object, ...], message: str, offset: int = 0) -> Problem:
        """A problem at the node `loc` of the entry's document (`offset` columns into it)."""
        line, col = loaded.where(*loc)
        return self.problem_at(loaded, line, col + offset, message)

    def problem_at(self, loaded: Loaded, line: int, col: int, message: str) -> Problem:
        return Problem.of(self.code, loaded.display, line, col, message)


class EntryCheck(Check):
    def check(self, loaded: Loaded, kb: KnowledgeBase) -> Iterable[Problem]:
        raise NotImplementedError


class KbCheck(Check):
    def check_kb(self, kb: KnowledgeBase) -> Iterable[Problem]:
        raise NotImplementedError


REGISTRY: dict[str, type[Check]] = {}


def register(cls: type[Check]) -> type[Check]:
    declared = lookup(cls.code)  # an undeclared code fails at import, before any check runs
    own = {"name", "description"} & set(vars(cls))
    if own:
        raise TypeError(f"{cls.__name__} sets {', '.join(sorted(own))}: they come from the code table (denpex_kb/codes.py)")
    if declared.name in REGISTRY:
        raise ValueError(f"check {declared.name!r} registered twice")
    cls.name, cls.description = declared.name, declared.description
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
