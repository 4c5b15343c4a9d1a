"""Named masks for the variable parts of log lines.

Each mask is one small object: a name, the RE2 pattern of what it covers, and the token it is replaced with
when a line is masked. The same objects serve three jobs: template placeholders (`{size}` compiles to the
size mask's pattern), masking a line before fuzzy comparison or de-duplication, and proposing a template
from a pasted line (`denpex-kb new --from-text`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class Mask:
    name: str
    pattern: str  # RE2 and Python `re` compatible
    description: str
    masks_lines: bool = True  # used when masking a whole line; False for placeholders only ({any}, {word})

    @property
    def token(self) -> str:
        return "{" + self.name + "}"


# Order matters when masking a line: the most specific masks run first, so that an IP address is not taken
# for numbers and a path keeps its digits.
MASKS: tuple[Mask, ...] = (
    Mask("ip", r"(?:\d{1,3}\.){3}\d{1,3}(?::\d{1,5})?", "an IPv4 address, with an optional port"),
    Mask(
        "path",
        r"(?:[A-Za-z]:\\|/)(?:[\w.@+~-]+[/\\])*[\w.@+~-]+",
        "an absolute file path (POSIX or Windows)",
    ),
    Mask("pci", r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F]", "a PCI address, e.g. 0000:3b:00.0"),
    Mask("hex", r"0x[0-9a-fA-F]+", "a hexadecimal number with its 0x prefix"),
    Mask(
        "size",
        r"\d+(?:\.\d+)? ?(?:[KMGTP]i?B|bytes|B)\b",
        "an amount of memory with its unit, e.g. 2.00 GiB, 512 MB, 1024 bytes",
    ),
    Mask("float", r"-?\d+\.\d+(?:[eE][-+]?\d+)?|-?\d+[eE][-+]?\d+|nan|inf", "a decimal or scientific number"),
    Mask("num", r"-?\d+", "an integer"),
    # The following are placeholders only: they cover text that masking a line should leave alone.
    Mask("int", r"-?\d+", "an integer (alias of num)", masks_lines=False),
    Mask("rank", r"\d+", "a rank number", masks_lines=False),
    Mask("pid", r"\d+", "a process id", masks_lines=False),
    Mask("host", r"[A-Za-z0-9][A-Za-z0-9_.-]*", "a host name", masks_lines=False),
    Mask("word", r"[\w.-]+", "one word (letters, digits, _ . -)", masks_lines=False),
    Mask("quoted", r"'[^']*'|\"[^\"]*\"", "a quoted string, in single or double quotes", masks_lines=False),
    Mask("any", r".*?", "any text, as little as possible", masks_lines=False),
)

BY_NAME: dict[str, Mask] = {m.name: m for m in MASKS}


def _line_masks() -> list[Mask]:
    return [m for m in MASKS if m.masks_lines]


@lru_cache(maxsize=1)
def _combined() -> re.Pattern[str]:
    # One alternation, tried left to right, so a span is masked once by the first (most specific) mask.
    # Word boundaries keep masks from biting into identifiers such as `cuda:0` or `fp16`.
    parts = [f"(?P<{m.name}>{m.pattern})" for m in _line_masks()]
    return re.compile(r"(?<![\w.])(?:" + "|".join(parts) + r")(?![\w])")


def mask_line(text: str) -> str:
    """Replace every variable part of `text` (one line) by its mask's token, e.g. `{size}`."""
    return _combined().sub(lambda m: "{" + (m.lastgroup or "num") + "}", text)


def masked_spans(text: str) -> list[tuple[int, int, str]]:
    """The (start, end, mask name) of each variable part of `text` (one line)."""
    return [(m.start(), m.end(), m.lastgroup or "num") for m in _combined().finditer(text)]
