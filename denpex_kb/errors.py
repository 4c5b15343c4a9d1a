"""The errors denpex-kb raises, on one base that can say where the fault is (file, line, column).

Callers catch `DenpexError` for anything the package refuses; the subclasses that were `ValueError`s before this
base existed still are, so existing `except ValueError` handlers keep working.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from .problems import Problem


class Location(NamedTuple):
    """A place in a file or a text: 1-based line and column; `path` is None for a text that is not a file."""

    path: str | None = None
    line: int = 1
    col: int = 1

    def __str__(self) -> str:
        where = f"{self.line}:{self.col}"
        return f"{self.path}:{where}" if self.path else where


class DenpexError(Exception):
    """Something denpex-kb refuses; `location` says where, when a place is known. `str()` is the message alone."""

    def __init__(self, message: str, location: Location | None = None) -> None:
        super().__init__(message)
        self.location = location

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""

    def located(self) -> str:
        """`path:line:col: message`, or the message alone when no place is known."""
        return f"{self.location}: {self.message}" if self.location else self.message


class LocatedError(DenpexError):
    """An error at a known place in a text (the start of the text unless said otherwise)."""

    location: Location

    def __init__(self, message: str, line: int = 1, col: int = 1, path: str | None = None) -> None:
        super().__init__(message, Location(path, line, col))

    @property
    def line(self) -> int:
        return self.location.line

    @property
    def col(self) -> int:
        return self.location.col


class BundleError(DenpexError, ValueError):
    """The compiled knowledge base cannot be used: another bundle format, or another knowledge base's index."""


class KnowledgeBaseError(DenpexError, ValueError):
    """A knowledge base with problems was to be compiled strictly; `problems` are the errors, the first one located."""

    def __init__(self, message: str, problems: Sequence[Problem] = ()) -> None:
        first = problems[0] if problems else None
        super().__init__(message, Location(first.path, first.line, first.col) if first else None)
        self.problems = list(problems)


class UnknownCodeError(DenpexError, LookupError):
    """A problem code that the code table (denpex_kb/codes.py) does not declare."""
