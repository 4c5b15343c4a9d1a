"""Literal anchors: substrings one of which every line matching a pattern must contain.

The scanner looks for anchors first (one pass of a multi-literal search over the raw log) and runs the full
patterns only on the few lines that contain one. The anchors of a regex are derived from its parse tree: the
longest required literal run, or, for a top-level alternation, one required literal per branch.
"""

from __future__ import annotations

import sys
from typing import Any

if sys.version_info >= (3, 11):
    import re._constants as _c
    import re._parser as _parser
else:  # pragma: no cover - Python 3.10
    import sre_constants as _c
    import sre_parse as _parser

Alternatives = frozenset[str]


def _best(candidates: list[Alternatives]) -> Alternatives | None:
    # The best candidate is the one whose shortest alternative is longest: it is the most selective.
    usable = [c for c in candidates if c and min(len(a) for a in c) > 0]
    if not usable:
        return None
    return max(usable, key=lambda c: (min(len(a) for a in c), -len(c), sorted(c)))


def _required(items: Any, ignorecase: bool) -> Alternatives | None:
    candidates: list[Alternatives] = []
    run: list[str] = []

    def end_run() -> None:
        if run:
            candidates.append(frozenset(["".join(run)]))
            run.clear()

    for op, arg in items:
        if op is _c.LITERAL and not ignorecase:
            run.append(chr(arg))
            continue
        if op is _c.SUBPATTERN:
            _group, add_flags, del_flags, sub = arg
            sub_ic = (ignorecase or bool(add_flags & _c.SRE_FLAG_IGNORECASE)) and not (
                del_flags & _c.SRE_FLAG_IGNORECASE
            )
            exact = _exact(sub, sub_ic)
            if exact is not None:
                run.append(exact)  # a group of pure literal text continues the run
                continue
            end_run()
            found = _required(sub, sub_ic)
            if found:
                candidates.append(found)
            continue
        end_run()
        if op is _c.BRANCH:
            branches = [_required(b, ignorecase) for b in arg[1]]
            if all(branches):
                candidates.append(frozenset().union(*branches))  # type: ignore[arg-type]
        elif op in (_c.MAX_REPEAT, _c.MIN_REPEAT, getattr(_c, "POSSESSIVE_REPEAT", None)):
            low, _high, sub = arg
            if low >= 1:
                found = _required(sub, ignorecase)
                if found:
                    candidates.append(found)
        elif op is _c.ATOMIC_GROUP if hasattr(_c, "ATOMIC_GROUP") else False:
            found = _required(arg, ignorecase)
            if found:
                candidates.append(found)
        # Everything else (classes, ANY, AT, NOT_LITERAL, ...) matches variable text and ends the run.
    end_run()
    return _best(candidates)


def _exact(items: Any, ignorecase: bool) -> str | None:
    """The text a sub-pattern matches when it is pure literal, else None."""
    out = []
    for op, arg in items:
        if op is _c.LITERAL and not ignorecase:
            out.append(chr(arg))
        elif op is _c.SUBPATTERN and not arg[1] and not arg[2]:
            inner = _exact(arg[3], ignorecase)
            if inner is None:
                return None
            out.append(inner)
        else:
            return None
    return "".join(out)


def regex_anchors(pattern: str) -> list[str] | None:
    """Anchors of an RE2 pattern, or None when no required literal can be derived.

    RE2 syntax is close enough to Python's for this purpose; a pattern Python cannot parse gets no anchors
    (the validator then asks for explicit ones).
    """
    try:
        tree = _parser.parse(pattern)
    except Exception:  # noqa: BLE001 - any parse failure means "cannot derive"
        return None
    ignorecase = bool(tree.state.flags & _c.SRE_FLAG_IGNORECASE)
    found = _required(tree, ignorecase)
    return sorted(found) if found else None
