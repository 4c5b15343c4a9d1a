"""Reading shell text as bash would, far enough to find what a reader's paste would get wrong: what stays outside
quotes, escapes and comments, and the `<placeholder>` words that bash would take for redirections."""

from __future__ import annotations

import re

# `<word>` (or `<a few words>`) where bash would see it: after masking quoted text. Heredocs (`<<`), process
# substitution (`<(`), fd duplications (`<&`, `2<`) and `<` directly after a word character are not placeholders.
PLACEHOLDER = re.compile(r"(?<![<&\w])<(?=[A-Za-z])[^<>|;&()\n]*>")


class UnclosedQuote(ValueError):
    pass


def unquoted(run: str) -> str:
    """`run` with every quoted character (quotes included), every backslash-escaped one and every comment replaced
    by a space, so that what remains is what bash parses as words and operators. UnclosedQuote if a quote never
    closes."""
    out: list[str] = []
    quote = ""
    escaped = comment = False
    for ch in run:
        if comment:
            comment = ch != "\n"
            out.append(ch if not comment else " ")
        elif escaped:
            out.append(" ")
            escaped = False
        elif ch == "#" and not quote and (not out or run[len(out) - 1] in " \t\n;&|("):
            out.append(" ")
            comment = True  # to the end of the line, quotes and all
        elif ch == "\\" and quote != "'":
            out.append(" ")
            escaped = True
        elif quote:
            out.append(" ")
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            out.append(" ")
            quote = ch
        else:
            out.append(ch)
    if quote:
        raise UnclosedQuote(quote)
    return "".join(out)
