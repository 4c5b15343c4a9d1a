"""Turning a signature (literal, regex or template) into one RE2 pattern, its anchors and its specificity."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from functools import lru_cache

import re2

from .anchors import regex_anchors
from .errors import DenpexError, Location
from .model import Signature, SignatureKind
from .templates import TemplateError, compile_template

if sys.version_info >= (3, 11):
    import re._constants as _c
    import re._parser as _parser
else:  # pragma: no cover
    import sre_constants as _c
    import sre_parse as _parser

MIN_ANCHOR = 6  # shorter anchors would make the prefilter pass too many lines
_SPACES = re.compile(r"[ \t]+")


class SignatureError(DenpexError, ValueError):
    """A signature that cannot be used; `offset` is the 0-based column in its text (its location's col is 1-based)."""

    def __init__(self, message: str, offset: int = 0) -> None:
        super().__init__(message, Location(None, 1, offset + 1))
        self.offset = offset


@dataclass(frozen=True)
class CompiledSignature:
    pattern: str
    anchors: tuple[str, ...]
    specificity: int  # literal characters every match contains: more means more specific evidence


def collapse_spaces(text: str) -> str:
    return _SPACES.sub(" ", text)


def _literal_chars(pattern: str) -> int:
    """How many literal characters a match of `pattern` must contain (required parts only)."""

    def count(items: object) -> int:
        total = 0
        for op, arg in items:  # type: ignore[attr-defined]
            if op is _c.LITERAL:
                total += 1
            elif op is _c.SUBPATTERN:
                total += count(arg[3])
            elif op is _c.BRANCH:
                total += min(count(b) for b in arg[1])
            elif op in (_c.MAX_REPEAT, _c.MIN_REPEAT) and arg[0] >= 1:
                total += count(arg[2])
        return total

    try:
        return count(_parser.parse(pattern))
    except Exception:  # noqa: BLE001
        return 0


@lru_cache(maxsize=4096)
def _re2_check(pattern: str) -> str | None:
    try:
        compiled = re2.compile(pattern)
    except re2.error as exc:
        return f"does not compile under RE2 ({exc}); RE2 has no lookarounds or backreferences"
    if compiled.search("") is not None:
        # Everything in it is optional: once the prefilter lets a line through, the signature matches it whatever
        # the line says, so the anchor alone would decide.
        return "matches the empty string, so it matches any line; make at least one part required (drop a `?`, `*` or empty alternative)"
    return None


def compile_signature(sig: Signature) -> CompiledSignature:
    if sig.kind is SignatureKind.literal:
        text = collapse_spaces(sig.text)
        pattern = re2.escape(text)
        anchors = tuple(sig.anchors or [text])
        specificity = len(text)
    elif sig.kind is SignatureKind.template:
        try:
            tpl = compile_template(sig.text)
        except TemplateError as exc:
            raise SignatureError(str(exc), exc.offset) from None
        pattern = tpl.pattern
        longest = max(tpl.literals, key=len, default="")
        anchors = tuple(sig.anchors or ([longest] if longest else []))
        specificity = sum(len(x) for x in tpl.literals)
    else:
        pattern = sig.text
        if pattern.startswith("^") or pattern.endswith("$"):
            raise SignatureError("do not anchor with ^ or $; a signature is searched in the line with its prefixes "
                                 "removed, and one that must be the whole of that line is written \\A...\\z")
        derived = regex_anchors(pattern)
        anchors = tuple(sig.anchors or derived or [])
        specificity = _literal_chars(pattern)
    error = _re2_check(pattern)
    if error:
        raise SignatureError(error)
    if not anchors:
        raise SignatureError(
            "no literal anchor can be derived; add `anchors:` with a literal every matching line contains"
        )
    short = [a for a in anchors if len(a.strip()) < MIN_ANCHOR]
    if short:
        raise SignatureError(
            f"anchor {short[0]!r} is shorter than {MIN_ANCHOR} characters, so it would pass too many lines; "
            "make the fixed text longer or give a longer `anchors:` literal"
        )
    return CompiledSignature(pattern, tuple(collapse_spaces(a) for a in anchors), max(specificity, 1))
