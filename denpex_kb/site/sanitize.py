"""Contributor text is never trusted: what reaches a page is Markdown with no raw HTML and only http(s) links.

Text outside code is HTML-escaped (so `<script>` shows as text), Markdown links are rebuilt as anchors this
module writes itself, with an http(s) check and `rel="noopener"`, and any other link syntax is defused.
Code spans and fenced blocks are left to Markdown, which escapes their content.
"""

from __future__ import annotations

import html
import re

_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})[^\n]*\n.*?(?:^\1?\2[ \t]*$|\Z)", re.S | re.M)
_CODE_SPAN = re.compile(r"(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
_LINK = re.compile(r"\[([^\]\n]{1,300})\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
_REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*\S+.*$", re.M)
_SAFE_URL = re.compile(r"^https?://[^\s\"'<>]+$")


def safe_url(url: str) -> str | None:
    return url if _SAFE_URL.match(url) else None


def link(url: str, text: str) -> str:
    """An external link as HTML this module vouches for: escaped, http(s) only, rel=noopener."""
    checked = safe_url(url)
    # Brackets and braces too, so the label cannot become Markdown link or attribute syntax.
    label = html.escape(text, quote=False).replace("[", "&#91;").replace("]", "&#93;").replace("{", "&#123;")
    if checked is None:
        return label
    return f'<a href="{html.escape(checked, quote=True)}" rel="noopener nofollow">{label}</a>'


def _escape_text(text: str) -> str:
    out: list[str] = []
    pos = 0
    for m in _LINK.finditer(text):
        out.append(_escape_plain(text[pos : m.start()]))
        out.append(link(m.group(2), m.group(1)))
        pos = m.end()
    out.append(_escape_plain(text[pos:]))
    return "".join(out)


def _escape_plain(text: str) -> str:
    text = _REF_DEF.sub(lambda m: html.escape(m.group(0).replace("]:", "]\\:"), quote=False), text)
    # `&` stays (entities are harmless); `<` and `>` cannot open a tag; `{` cannot start an attribute list.
    return text.replace("<", "&lt;").replace(">", "&gt;").replace("{", "&#123;")


def _inline(text: str) -> str:
    out: list[str] = []
    pos = 0
    for m in _CODE_SPAN.finditer(text):
        out.append(_escape_text(text[pos : m.start()]))
        out.append(m.group(0))
        pos = m.end()
    out.append(_escape_text(text[pos:]))
    return "".join(out)


def safe_markdown(text: str) -> str:
    """Contributor Markdown made inert: code kept, everything else escaped, links checked."""
    out: list[str] = []
    pos = 0
    for m in _FENCE.finditer(text):
        out.append(_inline(text[pos : m.start()]))
        block = m.group(0)
        fence = m.group(2)
        if not block.rstrip().endswith(fence) or block.count("\n") < 1:
            block = block.rstrip("\n") + "\n" + m.group(1) + fence + "\n"  # close an unclosed fence
        out.append(block)
        pos = m.end()
    out.append(_inline(text[pos:]))
    return "".join(out)


def safe_inline(text: str) -> str:
    """One-line contributor text (titles, list items): escaped, newlines folded."""
    return _inline(" ".join(text.split()))


def safe_label(text: str) -> str:
    """One-line text for a link label or a table cell: as safe_inline, and no backtick left to open a code span
    that would run across the link's target or into the next cell."""
    return safe_inline(text).replace("`", "&#96;").replace("|", "&#124;")


def fence(text: str, lang: str = "text") -> str:
    """A fenced code block that cannot be closed early by its content."""
    longest = max((len(m.group(0)) for m in re.finditer(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}"
