"""Problems found in the knowledge base, each with a place, a severity and a sentence on how to fix it."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import Enum


class Severity(str, Enum):
    error = "error"
    warning = "warning"


@dataclass(frozen=True, order=True)
class Problem:
    path: str  # as given, relative to the working directory where possible
    line: int  # 1-based; 0 when the problem concerns the whole file
    col: int  # 1-based
    code: str  # stable code, e.g. DKB103
    check: str  # the name of the check that found it
    message: str  # what is wrong and how to fix it
    severity: Severity = Severity.error

    def render(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.severity.value} {self.code} [{self.check}] {self.message}"

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["severity"] = self.severity.value
        return d
