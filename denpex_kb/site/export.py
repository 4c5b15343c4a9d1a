"""The compiled index as a JSON asset for the hub's paste box: the same signatures, anchors and prefixes as
`denpex-kb match`, with regexes rewritten for JavaScript.

Signature patterns are RE2; RE2 syntax is nearly a subset of JavaScript's (no lookaround, no backreferences),
so the rewrite is small: `(?P<n>` becomes `(?<n>`, `\\A`/`\\z` become `^`/`$`, `\\a` becomes `\\x07`, POSIX
classes are spelled out. What JavaScript cannot take the same way (inline flags, `\\C`, `\\Q...\\E`, Unicode
classes, code points above U+FFFF) makes the signature skipped, and counted; the page says how many.
Signatures run without the `u` flag, so `\\w`, `\\d`, `\\s` and `\\b` stay ASCII as in RE2.

The prefix and paste-normalizer patterns are Python `re` with Unicode classes: they are rewritten for the `u`
flag (`\\w` as `[\\p{L}\\p{N}_]`, `\\d` as `\\p{Nd}`, `(?P=n)` as `\\k<n>`).

Everything in the asset is data: the page's script reads it with JSON.parse and writes it into the page only
as text (textContent) or as a checked relative link, never as HTML.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .. import fuzzy, masks, matcher, normalize, paste
from ..bundle import SignatureRow
from ..compiler import compile_fuzzy
from ..loader import KnowledgeBase

ASSET = "assets/dkb-match-index.json"
FORMAT = 1

_POSIX = {
    "alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": "\\x00-\\x7f", "blank": "\\t ", "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9", "graph": "!-~", "lower": "a-z", "print": " -~", "punct": "!-/:-@\\[-`{-~",
    "space": "\\t\\n\\v\\f\\r ", "upper": "A-Z", "word": "0-9A-Za-z_", "xdigit": "0-9A-Fa-f",
}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Untranslatable(ValueError):
    pass


def re2_to_js(pattern: str) -> str:
    """An RE2 pattern as a JavaScript RegExp source (no flags), or Untranslatable."""
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 >= n:
                raise Untranslatable("trailing backslash")
            d = pattern[i + 1]
            if d in "CQEpP":
                raise Untranslatable(f"\\{d}")
            if d == "A" and not in_class:
                out.append("^")
            elif d == "z" and not in_class:
                out.append("$")
            elif d == "a":
                out.append("\\x07")
            elif d == "x" and pattern.startswith("{", i + 2):
                end = pattern.index("}", i + 2)
                code = int(pattern[i + 3 : end], 16)
                if code > 0xFFFF:
                    raise Untranslatable("a code point above U+FFFF")
                out.append(f"\\u{code:04x}")
                i = end + 1
                continue
            elif (d.isdigit() and d != "0") or d in "AzZGKkgR":
                raise Untranslatable(f"\\{d}")
            else:
                out.append(c + d)
            i += 2
            continue
        if in_class:
            if pattern.startswith("[:", i):
                end = pattern.find(":]", i + 2)
                name = pattern[i + 2 : end] if end > 0 else ""
                negated = name.startswith("^")
                if end < 0 or name.lstrip("^") not in _POSIX or negated:
                    raise Untranslatable("a POSIX class")
                out.append(_POSIX[name])
                i = end + 2
                continue
            if c == "]":
                in_class = False
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            out.append(c)
            i += 1
            if pattern.startswith("^", i):
                out.append("^")
                i += 1
            if pattern.startswith("]", i):  # a leading `]` is a literal in RE2, the end of the class in JS
                out.append("\\]")
                i += 1
            continue
        if c == "(" and pattern.startswith("(?", i):
            rest = pattern[i + 2 :]
            if rest.startswith("P<") or (rest.startswith("<") and not rest.startswith(("<=", "<!"))):
                start = i + 2 + (2 if rest.startswith("P<") else 1)
                end = pattern.index(">", start)
                name = pattern[start:end]
                if not _NAME.fullmatch(name):
                    raise Untranslatable(f"the group name {name!r}")
                out.append(f"(?<{name}>")
                i = end + 1
                continue
            if rest.startswith(":"):
                out.append("(?:")
                i += 3
                continue
            raise Untranslatable("an inline flag or group kind: (?" + rest[:3])
        out.append(c)
        i += 1
    if in_class:
        raise Untranslatable("an unclosed class")
    return "".join(out)


# The characters str.isspace() and Python's `\s` take, as a class body.
def _ranges(codes: list[int]) -> str:
    out, i = [], 0
    while i < len(codes):
        j = i
        while j + 1 < len(codes) and codes[j + 1] == codes[j] + 1:
            j += 1
        out.append(f"\\u{codes[i]:04x}" + (f"-\\u{codes[j]:04x}" if j > i else ""))
        i = j + 1
    return "".join(out)


_PYWS = _ranges([c for c in range(0x10000) if chr(c).isspace()])
_UWORD = "[\\p{L}\\p{N}_]"


def py_to_js_unicode(pattern: str) -> str:
    """A Python `re` pattern (str, Unicode classes) as a JavaScript RegExp source for the `u` flag."""
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        c = pattern[i]
        if c == "\\":
            d = pattern[i + 1]
            if d == "w":
                out.append("\\p{L}\\p{N}_" if in_class else "[\\p{L}\\p{N}_]")
            elif d == "d":
                out.append("\\p{Nd}")
            elif d in "WDAZbB" and in_class:
                raise Untranslatable(f"\\{d} in a class")
            elif d == "W":
                out.append("[^\\p{L}\\p{N}_]")
            elif d == "D":
                out.append("\\P{Nd}")
            elif d == "A":
                out.append("^")
            elif d == "Z":
                out.append("$")
            elif d in "sS":  # Python's whitespace (str.isspace), not JavaScript's
                if d == "S" and in_class:
                    raise Untranslatable("\\S in a class")
                out.append(_PYWS if in_class else f"[{'^' if d == 'S' else ''}{_PYWS}]")
            elif d == "b":  # Python's word boundary is between Unicode word characters; JavaScript's is ASCII
                out.append(f"(?:(?<={_UWORD})(?!{_UWORD})|(?<!{_UWORD})(?={_UWORD}))")
            elif d == "B":
                out.append(f"(?:(?<={_UWORD})(?={_UWORD})|(?<!{_UWORD})(?!{_UWORD}))")
            elif d.isalnum() or (d in "\\^$.|?*+()[]{}/-" and (in_class or d != "-")):
                out.append(c + d)
            else:
                out.append(d)  # an identity escape (`\ `, `\'`): the character itself, as the `u` flag wants
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            out.append(c)
            i += 1
            if pattern.startswith("^", i):
                out.append("^")
                i += 1
            continue
        if pattern.startswith("(?P<", i):
            out.append("(?<")
            i += 4
            continue
        if pattern.startswith("(?P=", i):
            end = pattern.index(")", i)
            out.append(f"\\k<{pattern[i + 4 : end]}>")
            i = end + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _py_regex(compiled: re.Pattern[str], *, ignore_case: bool = False) -> str:
    refused = re.MULTILINE | re.DOTALL | re.VERBOSE | (0 if ignore_case else re.IGNORECASE)
    if compiled.flags & refused:
        raise Untranslatable("flags")
    return py_to_js_unicode(compiled.pattern)


_ROLES = ("initiating", "collateral")


def fuzzy_index(kb: KnowledgeBase) -> dict[str, Any]:
    """What the page needs to run the fuzzy and exception-evidence tiers (denpex_kb/fuzzy.py) as `match` does:
    the known wordings' skeletons, the evidence classes, the rarity weights, and the patterns that make a
    skeleton, rewritten for JavaScript."""
    data = compile_fuzzy(kb)
    tables = fuzzy.export_tables(data)
    return {
        **tables,
        "roles": list(_ROLES),
        # entry position, role, skeleton: the origin is not shown by the page
        "known": [[row[0], _ROLES.index(row[1]), row[3]] for row in data["known"]],
        "evidence": data["evidence"],
        "masks": _py_regex(masks._combined()),
        "words": _py_regex(fuzzy._WORDS),
        "frame": _py_regex(fuzzy._FRAME),
        "lead": _py_regex(fuzzy._LEAD),
        "info": _py_regex(fuzzy._INFO, ignore_case=True),
        "exception": _py_regex(normalize._EXCEPTION),
        "fuzzy_top": matcher._FUZZY_TOP, "evidence_score": matcher._EVIDENCE_SCORE,
    }


def match_index(index: dict[str, Any], kb: KnowledgeBase) -> dict[str, Any]:
    """What the paste box needs from a compiled index (`compiler.compile_kb`): JSON-ready."""
    entries = []
    for e in index["entries"]:
        full = kb.entries.get(e["id"])
        entries.append({
            "id": e["id"], "title": e["title"], "phase": e["phase"], "severity": e["severity"], "fix": e["fix"],
            "retry": e.get("retry"), "blame": e.get("blame"),
            "status": full.status if full is not None else e.get("status"),
        })
    signatures = []
    skipped = []
    for s in index["signatures"]:
        row = SignatureRow(*s)  # by name: a field added to the row must not shift the ones read here
        try:
            js = re2_to_js(row.pattern)
        except (Untranslatable, ValueError) as exc:
            skipped.append({"entry": index["entries"][row.entry]["id"], "number": row.number, "why": str(exc)})
            continue
        signatures.append([row.entry, js, row.anchors, row.specificity, row.role, row.keys])
    return {
        "format": FORMAT,
        "digest": index.get("digest"),
        "entries": entries,
        "signatures": signatures,
        "skipped": skipped,
        "normalize": {
            "max_line": normalize.MAX_LINE,
            "ansi": _py_regex(normalize._ANSI),
            "tqdm": _py_regex(normalize._TQDM),
            "prefixes": [{"name": p.name, "pattern": _py_regex(p.pattern)} for p in normalize.PREFIXES],
            "not_after": {name: sorted(kinds) for name, kinds in normalize.NOT_AFTER.items()},
        },
        "paste": {
            "normalizers": [{"name": x.name, "pattern": _py_regex(x.pattern)} for x in paste.NORMALIZERS],
            "soft_wrap": {"max_lines": paste.SoftWrap.MAX_LINES, "min_width": paste.SoftWrap.MIN_WIDTH,
                          "terminal_min": paste.SoftWrap.TERMINAL_MIN, "max_joins": paste.SoftWrap.MAX_JOINS},
        },
        "matcher": {
            "min_score": matcher.MIN_SCORE, "wrap_penalty": matcher._WRAP_PENALTY,
            "soft_wrap_penalty": matcher._SOFT_WRAP_PENALTY, "case_penalty": matcher._CASE_PENALTY,
            "max_block_lines": matcher.MAX_BLOCK_LINES, "tiers": list(matcher.TIERS),
        },
        "fuzzy": fuzzy_index(kb),
    }


def match_index_json(index: dict[str, Any], kb: KnowledgeBase) -> str:
    # Compact, and `<`, `>`, `&` escaped too: the asset is never HTML, but it costs nothing to make it inert
    # should anything ever inline it.
    text = json.dumps(match_index(index, kb), ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
