"""The block structure of contributor Markdown: list items, their nesting, fenced code, paragraphs.

Entry files indent a nested list or a fence under `1. ` by the item's content column (three spaces), as
CommonMark and GitHub read it; Python-Markdown nests only by four spaces a level, so read as written the sub-steps
become top-level steps. `read_lines` reads the structure the CommonMark way, once: `reindent` writes it back for
Python-Markdown (the hub), `terminal_blocks` lays it out for `denpex-kb explain`.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass

_ITEM = re.compile(r"([-*+]|\d{1,9}[.)])(?:( +)(.*)|)$")
_FENCE_OPEN = re.compile(r"(`{3,}|~{3,})")


@dataclass(frozen=True)
class Line:
    kind: str  # "blank", "item", "text", "fence" (an opening or closing fence line) or "code"
    depth: int  # how many list items contain the line (an item's own nesting level: 0 at the top)
    indent: int  # columns beyond the content column of the innermost containing item
    text: str  # the line without its indentation; for an item, what follows the marker
    raw: str  # the line as written
    marker: str = ""


def read_lines(text: str) -> list[Line]:
    lines: list[Line] = []
    stack: list[int] = []  # content column of each open item
    fence: tuple[str, int, int] | None = None  # (fence character, run length, indent of its opening line)
    prev = "blank"
    for raw in text.split("\n"):
        stripped = raw.lstrip(" ")
        col = len(raw) - len(stripped)
        base = stack[-1] if stack else 0
        if fence is not None:
            char, run, at = fence
            body = stripped.rstrip()
            if body and set(body) == {char} and len(body) >= run:
                lines.append(Line("fence", len(stack), at, body, raw))
                fence = None
            else:
                # A content line less indented than its fence is pushed right, into the fence: it stays code.
                lines.append(Line("code", len(stack), max(col - base, at), stripped, raw))
            prev = "code"
            continue
        if not stripped.strip():
            lines.append(Line("blank", len(stack), 0, "", raw))
            prev = "blank"
            continue
        item = _ITEM.match(stripped)
        opens = _FENCE_OPEN.match(stripped)
        lazy = item is None and opens is None and prev in ("text", "item") and col < base
        if not lazy:
            while stack and col < stack[-1]:
                stack.pop()
        base = stack[-1] if stack else 0
        if item is not None and col < base + 4:  # four columns past the content column is indented code
            marker, spaces = item.group(1), item.group(2) or ""
            lines.append(Line("item", len(stack), col - base, item.group(3) or "", raw, marker))
            stack.append(col + len(marker) + (len(spaces) if 1 <= len(spaces) <= 4 else 1))
            prev = "item"
        elif opens is not None and not (opens.group(1)[0] == "`" and "`" in stripped[len(opens.group(1)) :]):
            at = col - base
            fence = (opens.group(1)[0], len(opens.group(1)), at)
            lines.append(Line("fence", len(stack), at, stripped.rstrip(), raw))
            prev = "code"
        else:
            lines.append(Line("text", len(stack), 0 if lazy else col - base, stripped, raw))
            prev = "text"
    return lines


def reindent(text: str) -> str:
    """The same Markdown with every nested line indented four spaces a level, as Python-Markdown reads lists.
    Lines outside any list are written as they were."""
    out: list[str] = []
    before: Line | None = None
    for line in read_lines(text):
        if before is not None and before.kind != "blank" and line.kind in ("text", "fence") and line.depth < before.depth:
            # Text that ends a list without a blank line (after a fence, where it cannot be a lazy continuation):
            # Python-Markdown would fold it into the last item.
            out.append("")
        before = line
        if line.depth == 0 or line.kind == "blank":
            out.append(line.raw)
        elif line.kind == "item":
            out.append("    " * line.depth + line.marker + " " + line.text)
        else:
            out.append("    " * line.depth + " " * line.indent + line.text)
    return "\n".join(out)


def terminal_blocks(text: str, width: int, indent: str = "  ", plain: bool = True) -> list[str]:
    """Paragraphs wrapped, list items as hanging paragraphs nested under their parents, code verbatim (indented
    four more than the text around it, without its fence lines). `plain` drops Markdown's bold markers."""
    out: list[str] = []
    columns = [len(indent)]  # where the text of each nesting level starts
    para: list[str] = []
    first = ""  # the first line's prefix of the paragraph being gathered
    rest = ""

    def flush() -> None:
        nonlocal para
        if para:
            words = " ".join(" ".join(para).split())
            if plain:
                words = words.replace("**", "")
            out.append(textwrap.fill(words, max(width, 20), initial_indent=first, subsequent_indent=rest,
                                     break_on_hyphens=False, break_long_words=False))
        para = []

    for line in read_lines(text):
        del columns[line.depth + 1 :]
        while len(columns) <= line.depth:
            columns.append(columns[-1] + 2)
        at = " " * columns[line.depth]
        if line.kind == "item":
            flush()
            mark = line.marker + " "
            first, rest = at + mark, at + " " * len(mark)
            columns.append(columns[line.depth] + len(mark))
            para = [line.text]
        elif line.kind == "text":
            if not para:
                first = rest = at
            para.append(line.text)
        elif line.kind == "blank" or line.kind == "fence":
            flush()
        else:
            flush()
            out.append((at + "    " + " " * line.indent + line.text).rstrip())
    flush()
    return out
