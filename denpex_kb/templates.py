"""Templates: signature text with named placeholders, compiled to RE2 patterns.

`CUDA out of memory. Tried to allocate {size:requested}` compiles to the literal text with the `size` mask's
pattern in a group named `requested`. `{{` and `}}` stand for literal braces; a run of spaces matches any run of
whitespace (lines are normalised to single spaces before matching), so column-aligned output still matches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import DenpexError, Location
from .masks import BY_NAME

_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]| +|[^{} ]+")
_PLACEHOLDER = re.compile(r"^(?P<mask>[a-z]+)(?::(?P<name>[a-z][a-z0-9_]*))?$")


class TemplateError(DenpexError, ValueError):
    """A malformed template; `offset` is the 0-based column in the template text (its location's col is 1-based)."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message, Location(None, 1, offset + 1))
        self.offset = offset


@dataclass(frozen=True)
class CompiledTemplate:
    pattern: str  # RE2 source
    literals: tuple[str, ...]  # the literal runs, in order (for anchors and specificity)
    groups: tuple[str, ...]  # names of the extracted values


def compile_template(text: str) -> CompiledTemplate:
    out: list[str] = []
    literals: list[str] = []
    groups: list[str] = []
    current: list[str] = []  # the literal run being built

    def flush() -> None:
        if current:
            literals.append("".join(current))
            current.clear()

    for m in _TOKEN.finditer(text):
        tok = m.group(0)
        if tok in ("{{", "}}"):
            out.append(re.escape(tok[0]))
            current.append(tok[0])
        elif tok in ("{", "}"):
            raise TemplateError(
                f"unbalanced '{tok}' in template; write '{tok}{tok}' for a literal brace", m.start()
            )
        elif tok.startswith("{"):
            inner = m.group(1) or ""
            pm = _PLACEHOLDER.match(inner)
            if not pm or pm.group("mask") not in BY_NAME:
                known = ", ".join("{" + n + "}" for n in BY_NAME)
                raise TemplateError(f"unknown placeholder '{tok}'; use one of {known}, optionally as {{size:name}}", m.start())
            mask = BY_NAME[pm.group("mask")]
            name = pm.group("name") or mask.name
            if name in groups:
                # A repeated placeholder is matched but only its first value is extracted.
                out.append(f"(?:{mask.pattern})")
            else:
                groups.append(name)
                out.append(f"(?P<{name}>{mask.pattern})")
            flush()
        elif tok.isspace():
            # Lines are normalised to single spaces before matching, so a space run is one space.
            out.append(" ")
            current.append(" ")
        else:
            out.append(re.escape(tok))
            current.append(tok)
    flush()
    return CompiledTemplate("".join(out), tuple(literals), tuple(groups))
