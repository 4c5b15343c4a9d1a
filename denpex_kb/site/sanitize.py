"""Contributor text is never trusted: what reaches a page is Markdown with no raw HTML and only http(s) links.

Text outside code is HTML-escaped (so `<script>` shows as text), Markdown links are rebuilt as anchors this
module writes itself, with an http(s) check and `rel="noopener"`, and any other link syntax is defused.
Code spans and fenced blocks are left to Markdown, which escapes their content. Two kinds of reference become
links this module writes: `owner/repo#N` in prose (a GitHub issue or pull request) and a code span that is
exactly the id of a known entry.
"""

from __future__ import annotations

import html
import re
from collections.abc import Collection

from .blocks import reindent

_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})[^\n]*\n.*?(?:^\1?\2[ \t]*$|\Z)", re.S | re.M)
_CODE_SPAN = re.compile(r"(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
_LINK = re.compile(r"\[([^\]\n]{1,300})\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
_REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*\S+.*$", re.M)
_SAFE_URL = re.compile(r"^https?://[^\s\"'<>]+$")
# A fence nested in a list item (indented four spaces or more once re-indented): code only if every line up to
# its closing fence is indented at least as far, as pymdownx.superfences requires; otherwise it is escaped as
# text. The two line alternatives are disjoint, so a fence without an end cannot make the search backtrack.
_NESTED_FENCE = re.compile(r"^( {4,})(`{3,}|~{3,})[\w+.-]*[ \t]*\n(?:\1[ \t]*\S[^\n]*\n|[ \t]*\n)*?\1\2[ \t]*$", re.M)
_ISSUE = re.compile(r"(?<![\w/.&#-])([A-Za-z0-9][A-Za-z0-9-]{0,38})/([A-Za-z0-9][A-Za-z0-9._-]{0,99})#([0-9]{1,7})\b")
_ENTRY_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,79}$")


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


def issue_url(owner: str, repo: str, number: str) -> str:
    # GitHub forwards /issues/N to /pull/N when N is a pull request.
    return f"https://github.com/{owner}/{repo}/issues/{number}"


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
    text = text.replace("<", "&lt;").replace(">", "&gt;").replace("{", "&#123;")
    # Escaped first: the reference's characters are letters, digits, `-._/#`, so escaping never splits one.
    return _ISSUE.sub(lambda m: link(issue_url(*m.groups()), m.group(0)), text)


def _inline(text: str, known: Collection[str] = ()) -> str:
    out: list[str] = []
    pos = 0
    for m in _CODE_SPAN.finditer(text):
        out.append(_escape_text(text[pos : m.start()]))
        span = m.group(0)
        target = m.group(2).strip()
        if m.group(1) == "`" and target in known and _ENTRY_ID.match(target):
            span = f"[{span}]({target}.md)"  # a sibling page; mkdocs checks the target in a strict build
        out.append(span)
        pos = m.end()
    out.append(_escape_text(text[pos:]))
    return "".join(out)


def _code_blocks(text: str) -> list[tuple[int, int, str]]:
    """(start, end, block) of every fenced block that Markdown will read as code, in order."""
    found: list[tuple[int, int, str]] = []
    pos = 0
    while True:
        top, nested = _FENCE.search(text, pos), _NESTED_FENCE.search(text, pos)
        if top is not None and (nested is None or top.start() <= nested.start()):
            block = top.group(0)
            fence = top.group(2)
            if not block.rstrip().endswith(fence) or block.count("\n") < 1:
                block = block.rstrip("\n") + "\n" + top.group(1) + fence + "\n"  # close an unclosed fence
            found.append((top.start(), top.end(), block))
            pos = top.end()
        elif nested is not None:
            found.append((nested.start(), nested.end(), nested.group(0)))
            pos = nested.end()
        else:
            return found


def safe_markdown(text: str, known: Collection[str] = ()) -> str:
    """Contributor Markdown made inert: code kept, everything else escaped, links checked. Nested lists are
    re-indented for Python-Markdown first (`blocks.reindent`); a code span naming an entry in `known` links to
    its page (a sibling: `known` is for text on entry pages)."""
    text = reindent(text)
    out: list[str] = []
    pos = 0
    for start, end, block in _code_blocks(text):
        out.append(_inline(text[pos:start], known))
        out.append(block)
        pos = end
    out.append(_inline(text[pos:], known))
    return "".join(out)


def safe_inline(text: str, known: Collection[str] = ()) -> str:
    """One-line contributor text (titles, list items): escaped, newlines folded."""
    return _inline(" ".join(text.split()), known)


def safe_label(text: str) -> str:
    """One-line text for a link label or a table cell, all of it text: no code span (its backticks would open one
    that runs across the link's target or into the next cell), no link, no markup (`__main__` stays a name, not
    bold `main`)."""
    one = " ".join(text.split())
    return (html.escape(one, quote=False).replace("[", "&#91;").replace("]", "&#93;").replace("{", "&#123;")
            .replace("`", "&#96;").replace("|", "&#124;").replace("*", "&#42;").replace("_", "&#95;"))


def fence(text: str, lang: str = "text") -> str:
    """A fenced code block that cannot be closed early by its content."""
    longest = max((len(m.group(0)) for m in re.finditer(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}"
