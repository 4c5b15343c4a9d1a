"""Problems found in the knowledge base, each with a place, a code from the code table and a sentence on the fix.

A problem's severity, fix sentence and hub URL come from its code (denpex_kb/codes.py); a code the table does not
declare cannot be used at all, so the loader, the validators and `test` cannot drift from the documented codes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .codes import Code, ProblemSeverity, code_url, lookup

__all__ = ["Problem", "ProblemSeverity"]


@dataclass(frozen=True, order=True)
class Problem:
    path: str  # as given, relative to the working directory where possible
    line: int  # 1-based; 0 when the problem concerns the whole file
    col: int  # 1-based
    code: str  # a code of the table, e.g. DKB103
    check: str  # what found it: the code's name, or the tool that reported it (e.g. fmt)
    message: str  # what is wrong here and how to fix it

    def __post_init__(self) -> None:
        lookup(self.code)  # raises UnknownCodeError: an undeclared code is never emitted

    @classmethod
    def of(cls, code: str, path: str, line: int, col: int, message: str) -> Problem:
        """A problem reported under its code's own name."""
        return cls(path, line, col, code, lookup(code).name, message)

    @property
    def declared(self) -> Code:
        return lookup(self.code)

    @property
    def severity(self) -> ProblemSeverity:
        return self.declared.severity

    @property
    def fix(self) -> str:
        """The code's how-to-fix sentence (the message says what to change in this place)."""
        return self.declared.fix

    @property
    def url(self) -> str:
        return code_url(self.code)

    def render(self) -> str:
        return (
            f"{self.path}:{self.line}:{self.col}: {self.severity.value} {self.code} [{self.check}] {self.message} "
            f"(see {self.url})"
        )

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d.update(severity=self.severity.value, fix=self.fix, url=self.url)
        return d
