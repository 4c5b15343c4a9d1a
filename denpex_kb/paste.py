"""Undoing what pasting does to a log line: markdown and chat artifacts, typography, truncation, soft wraps.

People rarely paste a log line as the program printed it. An issue tracker or a chat client renders markdown
(`**bold**`, backticks, `> ` quotes, list bullets) and the reader copies the rendered or the raw form; GitHub
turns anything shaped like a domain into a link (`net_ib.cc:101` becomes `[net_ib.cc:101](http://net_ib.cc:101/)`
when copied as markdown); editors and chat clients replace quotes with typographic ones and `...` with `…`; a
terminal or a chat window breaks a long line into several.

Each artifact is one named object, like the prefixes in `normalize.py`. `matcher.match` applies them only when
the exact pass (prefixes stripped, nothing else) finds nothing, and marks what it then finds as the
`normalized` tier, scored below any exact hit. Windows paths need no normalizer here: the `{path}` mask
already covers them, and no signature spells a path with `/` that a Windows paste would change. Doubled
spaces need none either: `strip_prefixes` collapses all whitespace on every pass.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import NamedTuple

Replacement = str | Callable[["re.Match[str]"], str]


class Normalizer(NamedTuple):
    """One pasted-text artifact: what it looks like and what the program printed instead."""

    name: str
    pattern: re.Pattern[str]
    replacement: Replacement
    why: str

    def apply(self, text: str) -> str:
        return self.pattern.sub(self.replacement, text)


def _link_text(m: re.Match[str]) -> str:
    return m.group("text")


# Order matters: quote markers and bullets come off the front before the backticks and bold they enclose,
# and links are undone before the emphasis around them.
NORMALIZERS: tuple[Normalizer, ...] = (
    Normalizer(
        "invisible-chars",
        re.compile("[\u200b\u200c\u200d\u2060\ufeff]"),
        "",
        "zero-width spaces and joiners, and stray byte-order marks, that web pages and chat clients insert",
    ),
    Normalizer(
        "fullwidth-ascii",
        # U+FF01-U+FF5E are the full-width forms of ASCII `!` to `~`, each 0xFEE0 above it; an input method for
        # Chinese, Japanese or Korean types the colon, comma and brackets of a retyped or translated message this way.
        # A full-width colon or comma carries its own spacing, so the space the message had after it is gone:
        # one is put back (whitespace runs are collapsed later).
        re.compile("[\uff01-\uff5e]"),
        lambda m: chr(ord(m.group()) - 0xFEE0) + (" " if m.group() in "\uff1a\uff0c" else ""),
        "full-width punctuation and letters (`RuntimeError\uff1a`) that an East Asian input method types for ASCII",
    ),
    Normalizer(
        "quote-marker",
        # `> text`, nested `> > text`; also the `>>> ` of a pasted REPL session.
        re.compile(r"^[ \t]*(?:>[ \t]?)+"),
        "",
        "markdown block quotes: a reply that quotes the error line",
    ),
    Normalizer(
        "list-bullet",
        # `- `, `* `, `+ `, `• `, `1. `, `2) ` followed by text; a bullet needs the space after it.
        re.compile(r"^[ \t]*(?:[-*+\u2022\u25e6\u25aa]|\d{1,3}[.)])[ \t]+(?=\S)"),
        "",
        "markdown and chat list bullets in front of a quoted line",
    ),
    Normalizer(
        "code-fence",
        # An opening or closing fence on the line itself: ```, ```python, ~~~. A language tag is lowercase and
        # ends at a space, so the text of ```RuntimeError: ...``` or ```Traceback ... is not taken for one.
        re.compile(r"^[ \t]*(?:```|~~~)(?:[a-z][a-z0-9+-]*(?=[ \t]|$))?[ \t]*|[ \t]*(?:```|~~~)[ \t]*$"),
        "",
        "a markdown code fence written on the same line as the text it fences",
    ),
    Normalizer(
        "markdown-link",
        # `[text](http://...)`, `[text](https://localhost:8080/#)`, `[a@b.c](mailto:a@b.c)`: the text is what
        # was printed; the target is what the renderer (GitHub autolinking, a notebook) made of it.
        re.compile(r"\[(?P<text>[^\[\]\n]{1,500})\]\((?:https?://|mailto:|#)[^()\s]{0,500}\)"),
        _link_text,
        "GitHub autolinks (a file name like net_ib.cc:101 looks like a domain) and notebook frame links",
    ),
    Normalizer(
        "wrapping-backticks",
        # A code span around the whole line: the same run of backticks at both edges and none inside, so a
        # message's own inline code (`FlatParameter` requires ... `requires_grad`) stays.
        re.compile(r"^[ \t]*(?P<ticks>`+)[ \t]*(?P<text>[^`]+?)[ \t]*(?P=ticks)[ \t]*$"),
        lambda m: m.group("text"),
        "an inline code span around the whole pasted line",
    ),
    Normalizer(
        "double-backtick-code",
        # Markdown's way to put a message holding backticks in inline code: two backticks at each edge, and inside
        # only runs of one or of three or more (a run of two would close the span), e.g. `` `num_stages` may help ``.
        re.compile(r"^[ \t]*``(?!`)[ \t]*(?P<text>(?:[^`]|(?<!`)`(?!`)|`{3,})+?)[ \t]*(?<!`)``[ \t]*$"),
        lambda m: m.group("text"),
        "an inline code span of two backticks around a pasted line that holds backticks of its own",
    ),
    Normalizer(
        "markdown-emphasis",
        # `**text**` anywhere in the line, and an unpaired `**` at either edge; `__text text__` only around a
        # phrase with a space in it, outside any identifier, so dunder names (`__main__`, `x.__class__`) stay.
        re.compile(
            r"\*\*(?=\S)(?P<text>[^*\n]*?\S)\*\*|(?<![\w.])__(?=[^\s_])(?P<text2>[^_\n]* [^_\n]*?[^\s_])__(?![\w.])"
            r"|^\*\*|\*\*$"
        ),
        lambda m: m.group("text") or m.group("text2") or "",
        "markdown bold around the line or a part of it (`__x__` only when not part of a dunder name)",
    ),
    Normalizer(
        "smart-quotes",
        re.compile("[\u2018\u2019\u201a\u201b\u2032\u201c\u201d\u201e\u201f\u2033]"),
        lambda m: "'" if m.group() in "\u2018\u2019\u201a\u201b\u2032" else '"',
        "typographic quotes that editors, chat clients and some renderers put in place of ' and \"",
    ),
    Normalizer(
        "ellipsis",
        # `…` at the end is a truncation mark (dropped); anywhere else it stands for the `...` it replaced.
        re.compile("[ \t]*\u2026+[ \t]*$|\u2026"),
        lambda m: "" if m.group().strip(" \t").endswith("\u2026") and m.end() == len(m.string) else "...",
        "a typographic ellipsis: the mark of a truncated paste at the end, an autocorrected `...` elsewhere",
    ),
    Normalizer(
        "escaped-quotes",
        re.compile(r"\\(['\"])"),
        r"\1",
        "quotes escaped by a JSON or Python-repr dump of the message",
    ),
)

BY_NAME: dict[str, Normalizer] = {n.name: n for n in NORMALIZERS}


def normalize_line(raw: str) -> str:
    """`raw` with every pasted-text artifact undone, in order."""
    text = raw
    for normalizer in NORMALIZERS:
        text = normalizer.apply(text)
    return text


def applied(raw: str) -> list[str]:
    """The names of the normalizers that change `raw` (for tests and explanations)."""
    names, text = [], raw
    for normalizer in NORMALIZERS:
        after = normalizer.apply(text)
        if after != text:
            names.append(normalizer.name)
        text = after
    return names


class SoftWrap:
    """A long line a terminal or a chat client broke into several: consecutive non-empty lines joined.

    A terminal breaks at a fixed column, often inside a word: such a break is joined without a space. A chat
    client or an editor breaks at a space and drops it: joined with one. Which one a break is cannot always be
    told, so each window is tried both ways: every break joined with a space, and the terminal reading, where a
    break after a line of the paragraph's wrap width (or, with no width to go by, after any line at least
    MIN_WIDTH long) that does not end in a space is joined without one.
    """

    name = "soft-wrap"
    MAX_LINES = 6  # a message is rarely longer than six wrapped lines
    MIN_WIDTH = 40  # narrower "widths" are coincidences, not a terminal
    TERMINAL_MIN = 80  # the narrowest terminal: a shorter line is not taken for a single wrap's first piece
    MAX_JOINS = 4_000  # a bound on the work for a very long paste

    @classmethod
    def width(cls, raw_lines: list[str]) -> int | None:
        """The wrap width of a paragraph: a length at least MIN_WIDTH shared by two or more of its lines."""
        counts = Counter(len(r.rstrip("\n")) for r in raw_lines[:-1])
        return max((n for n, c in counts.items() if c >= 2 and n >= cls.MIN_WIDTH), default=None)

    @classmethod
    def _cut(cls, prev: str, width: int | None) -> bool:
        if prev.endswith((" ", "\t")) or len(prev) < cls.MIN_WIDTH:
            return False
        return width is None or len(prev) == width

    @classmethod
    def terminal(cls, raw_lines: list[str], prefixed: list[bool]) -> list[tuple[int, int, str]]:
        """The lines a terminal printed, rebuilt where it wrapped them at its width: (first line index, number of
        lines, the printed line) for each wrapped one, its pieces concatenated as they are.

        A terminal's wrap leaves a width: two or more lines of one length (at least MIN_WIDTH) and no line longer.
        A line of exactly that width continues on the next line unless that one is empty or opens with a log
        prefix (`prefixed`: a new printed line, e.g. the next rank's copy of the same message)."""
        width = cls.width(raw_lines)
        if width is None or max(len(r) for r in raw_lines) != width:
            return []
        out: list[tuple[int, int, str]] = []
        i, n = 0, len(raw_lines)
        while i < n - 1:
            j = i
            while j < n - 1 and len(raw_lines[j]) == width and raw_lines[j + 1].strip() and not prefixed[j + 1]:
                j += 1
            if j > i:
                out.append((i, j - i + 1, "".join(raw_lines[i : j + 1])))
            i = j + 1
        return out

    @classmethod
    def cut_pairs(cls, raw_lines: list[str], prefixed: list[bool]) -> list[tuple[int, str]]:
        """Lines a terminal wrapped once, rebuilt: (first line index, the two pieces concatenated as they are).

        One wrap leaves no width to go by (`terminal` needs two lines of one length), so only the shape is: a line
        at least TERMINAL_MIN long that does not end in a space, then a line no longer than it that is not empty,
        does not open with a space and does not open with a log prefix."""
        out: list[tuple[int, str]] = []
        for i in range(len(raw_lines) - 1):
            head, tail = raw_lines[i].rstrip("\n"), raw_lines[i + 1].rstrip("\n")
            if (len(head) >= cls.TERMINAL_MIN and not head[-1].isspace() and tail and not tail[0].isspace()
                    and len(tail) <= len(head) and not prefixed[i + 1]):
                out.append((i, head + tail))
        return out

    @classmethod
    def joins(cls, raw_lines: list[str], texts: list[str]) -> list[tuple[int, int, str]]:
        """(first line index, number of lines, joined text) for windows of 2..MAX_LINES lines in paragraphs.

        `raw_lines` are the pasted lines, `texts` the same lines normalised (prefixes stripped); a paragraph
        is a run of non-empty texts.
        """
        out: list[tuple[int, int, str]] = []
        i, n = 0, len(texts)
        while i < n:
            if not texts[i]:
                i += 1
                continue
            j = i
            while j < n and texts[j]:
                j += 1
            if j - i >= 2:
                width = cls.width(raw_lines[i:j])
                for start in range(i, j):
                    spaced = cut = texts[start]
                    for end in range(start + 1, min(j, start + cls.MAX_LINES)):
                        spaced = f"{spaced} {texts[end]}"
                        glue = "" if cls._cut(raw_lines[end - 1].rstrip("\n"), width) else " "
                        cut = f"{cut}{glue}{texts[end]}"
                        out.append((start, end - start + 1, spaced))
                        if cut != spaced:
                            out.append((start, end - start + 1, cut))
                        if len(out) >= cls.MAX_JOINS:
                            return out
            i = j
        return out
