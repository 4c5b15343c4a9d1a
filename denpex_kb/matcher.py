"""`match`: which failure a pasted line or block is, ranked by evidence."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

import re2

from .bundle import _RE2_OPTIONS, _WORD, IndexedSignature, KbIndex, default_index
from .normalize import Line, exception_type, strip_prefixes
from .paste import SoftWrap, normalize_line

# Scores are 0-100. A signature hit scores by how much fixed text it matched: a long specific message is
# stronger evidence than a short generic one. Lines joined across a hard wrap score a little lower.
MIN_SCORE = 50
_WRAP_PENALTY = 5
MAX_BLOCK_LINES = 2_000
# Tiers. "exact": the line as printed, prefixes stripped. "normalized": only when the exact pass finds nothing,
# the same text with pasted-text artifacts undone (denpex_kb/paste.py), then soft-wrapped lines joined, then
# matched ignoring case. A normalized hit must first earn MIN_SCORE like an exact one; its score is then halved,
# so every normalized score is below MIN_SCORE and below any exact hit.
EXACT = "exact"
NORMALIZED = "normalized"
# "fuzzy": only when the tiers above found nothing, a line close to a wording an entry knows (denpex_kb/fuzzy.py).
# "evidence": only when fuzzy found nothing too, a bare exception class that one or two entries raise.
# Their scores stay below every normalized one: fuzzy 1-24, evidence 1-10.
FUZZY = "fuzzy"
EVIDENCE = "evidence"
TIERS = (EXACT, NORMALIZED, FUZZY, EVIDENCE)
_TIER_ORDER = {tier: n for n, tier in enumerate(TIERS)}
_FUZZY_TOP = 24
_EVIDENCE_SCORE = 10
_SOFT_WRAP_PENALTY = 10  # before halving
_CASE_PENALTY = 10  # after halving


def _normalized_score(exact_score: int) -> int:
    return max(1, min(MIN_SCORE - 1, exact_score // 2))


def score_for(specificity: int) -> int:
    return min(99, 55 + specificity // 2)


_NO_VALUES: Mapping[str, Any] = MappingProxyType({})


class Match(NamedTuple):
    """One entry that `match` found in the text, with the evidence. Immutable (`_replace` makes a changed copy);
    a named tuple, not a dataclass: importing `dataclasses` (and `inspect` with it) lengthens every fresh `match`
    process by about an eighth."""

    id: str
    title: str
    phase: str
    severity: str
    score: int  # 0-100
    signature: str  # the pattern that matched
    role: str  # the signature's role: initiating or collateral
    text: str  # the normalised line it matched
    values: Mapping[str, Any] = _NO_VALUES  # extracted values: sizes, ranks, codes
    fix: str = ""  # the one-line fix
    url: str = ""  # the entry's page on the hub
    specificity: int = 0
    line_number: int = 1  # 1-based, within the text given
    retry: str | None = None  # the entry's response: no | yes | elsewhere | depends
    blame: str | None = None
    # "exact"; "normalized": found only after undoing pasted-text artifacts; "fuzzy": close to a known wording, no
    # signature matched (`signature` is then that wording's skeleton); "evidence": an exception class alone
    # (`signature` is the class)
    tier: str = EXACT
    # What the versions the text (or --env) names say of the entry's affected versions, and of the releases that
    # print the matched wording; an answer outside the affected versions is ranked after the others, never dropped
    version_notes: tuple[str, ...] = ()
    # The releases that print the matched wording, as (package, specifier) pairs; () when every release does
    printed_by: tuple[tuple[str, str], ...] = ()
    pack: str | None = None  # the installed pack the entry comes from; None: the knowledge base itself

    def to_dict(self) -> dict[str, Any]:
        d = self._asdict()
        d["values"] = dict(self.values)
        d["version_notes"] = list(self.version_notes)
        d["printed_by"] = dict(self.printed_by)
        return d

    @property
    def line(self) -> str:
        """Deprecated in 0.2.0, removed in 0.3.0: the matched line's text is `text` (`line` names a `Line`)."""
        warnings.warn("Match.line is deprecated; use Match.text", DeprecationWarning, stacklevel=2)
        return self.text

    def __repr__(self) -> str:
        return (f"Match(id={self.id!r}, score={self.score}, tier={self.tier!r}, text={self.text[:60]!r}, "
                f"values={dict(self.values)})")


def _values(m: Any, line: Line, exc: str | None) -> dict[str, Any]:
    values: dict[str, Any] = {k: v for k, v in m.groupdict().items() if v is not None}
    if line.rank is not None:
        values.setdefault("rank", line.rank)
    if line.host:
        values.setdefault("host", line.host)
    if exc:
        values.setdefault("exception", exc)
    return values


def match_line(text: str, index: KbIndex) -> list[tuple[IndexedSignature, Any]]:
    """Every signature hit in one normalised line."""
    hits = []
    for sig in index.candidates(text):
        m = sig.regex.search(text)
        if m is not None:
            hits.append((sig, m))
    return hits


def _best_per_entry(found: dict[str, Match], candidate: Match) -> None:
    current = found.get(candidate.id)
    if current is None or (candidate.score, candidate.specificity) > (current.score, current.specificity):
        found[candidate.id] = candidate


def _as_text(text: object) -> str:
    if isinstance(text, str):
        return text
    if isinstance(text, (bytes, bytearray, memoryview)):
        return bytes(text).decode("utf-8", "replace")
    raise TypeError(f"match() takes the error text as a str (or UTF-8 bytes), not {type(text).__name__}")


# Case-insensitive matching, the last pass: the word index and the regexes, lowercased and compiled on first use.
_CASE_OPTIONS = re2.Options()
_CASE_OPTIONS.max_mem = _RE2_OPTIONS.max_mem
_CASE_OPTIONS.case_sensitive = False
_CASE_REGEX: dict[str, Any] = {}
_CASE_INDEX: dict[int, _CaseIndex] = {}


class _CaseIndex:
    """The word index lowercased, each signature's anchors lowercased, and the word-less anchors in one
    case-insensitive RE2 set: built once per index, so a line costs what the case-sensitive pass costs."""

    def __init__(self, index: KbIndex) -> None:
        self.index = index
        self.words: dict[str, list[IndexedSignature]] = {}
        for word, sigs in index.word_index.items():
            self.words.setdefault(word.lower(), []).extend(sigs)
        self.anchors = {id(sig): tuple(a.lower() for a in sig.anchors) for sig in index.signatures}
        self.always_sigs = index._always_sigs
        self.always: Any = None
        if index._always_anchors:
            self.always = re2.Set.SearchSet(_CASE_OPTIONS)
            for anchor in index._always_anchors:
                self.always.Add(re2.escape(anchor))
            self.always.Compile()


def _case_index(index: KbIndex) -> _CaseIndex:
    cached = _CASE_INDEX.get(id(index))
    if cached is None or cached.index is not index:
        cached = _CASE_INDEX[id(index)] = _CaseIndex(index)
    return cached


def match_line_ignoring_case(text: str, index: KbIndex) -> list[tuple[IndexedSignature, Any]]:
    """Every signature hit in one normalised line, letter case ignored."""
    case = _case_index(index)
    low = text.lower()
    found: dict[int, IndexedSignature] = {}
    for word in set(_WORD.findall(low)):
        for sig in case.words.get(word, ()):
            found[id(sig)] = sig
    if case.always is not None:
        for i in case.always.Match(text) or ():
            for sig in case.always_sigs[i]:
                found[id(sig)] = sig
    hits = []
    for key, sig in found.items():
        if not any(a in low for a in case.anchors[key]):
            continue
        regex = _CASE_REGEX.get(sig.pattern)
        if regex is None:
            regex = _CASE_REGEX[sig.pattern] = re2.compile(sig.pattern, _CASE_OPTIONS)
        m = regex.search(text)
        if m is not None:
            hits.append((sig, m))
    return hits


def _pasted_line(raw: str) -> Line:
    """`raw` with pasted-text artifacts undone, around and inside the log prefixes."""
    line = strip_prefixes(normalize_line(raw))
    inner = normalize_line(line.text)
    if inner != line.text:
        again = strip_prefixes(inner)
        again.rank = line.rank if line.rank is not None else again.rank
        again.host = line.host or again.host
        line = again
    return line


def match(text: str | bytes, *, top: int = 5, index: KbIndex | None = None, fuzzy: bool = True,
          versions: Mapping[str, str] | None = None) -> list[Match]:
    """The failures `text` (one line or a pasted block) shows, best first; [] when none is confidently matched.

    `text` is a str; bytes are decoded as UTF-8 (undecodable bytes replaced). Anything else is a TypeError.
    fuzzy=False: signatures only (the exact and normalized tiers), as `denpex-kb test` checks them.
    versions: package -> version the job ran (e.g. from `collect_env`); the versions `text` itself prints are
    read too, and the given ones win. Each answer says what they mean for its entry's affected versions.
    """
    text = _as_text(text)
    index = index or default_index()
    raw_lines = text.splitlines()[:MAX_BLOCK_LINES] or [""]
    lines = [strip_prefixes(r) for r in raw_lines]
    found: dict[str, Match] = {}

    def consider(sig: IndexedSignature, m: Any, line: Line, number: int, penalty: int = 0, tier: str = EXACT,
                 case_penalty: int = 0) -> None:
        exc = exception_type(line.text)
        score = score_for(sig.specificity) - penalty
        if score < MIN_SCORE:
            return
        if tier != EXACT:
            score = max(1, _normalized_score(score) - case_penalty)
        _best_per_entry(
            found,
            Match(
                id=sig.entry.id,
                title=sig.entry.title,
                phase=sig.entry.phase,
                severity=sig.entry.severity,
                score=score,
                signature=sig.pattern,
                role=sig.role,
                text=line.text,
                values=_values(m, line, exc),
                fix=sig.entry.fix,
                url=sig.entry.url,
                specificity=sig.specificity,
                line_number=number,
                retry=sig.entry.retry,
                blame=sig.entry.blame,
                tier=tier,
                printed_by=sig.versions,
                pack=sig.entry.pack,
            ),
        )

    def reread(printed: str, number: int) -> None:
        """A wrapped line rebuilt from its pasted pieces: its prefixes stripped again, read with a wrap's penalty."""
        rebuilt = strip_prefixes(printed)
        for sig, m in match_line(rebuilt.text, index):
            consider(sig, m, rebuilt, number, _WRAP_PENALTY)

    for i, line in enumerate(lines):
        for sig, m in match_line(line.text, index):
            consider(sig, m, line, i + 1)
    # A message hard-wrapped over two lines: each line joined with the next one. Lines that matched too: a
    # piece of a wrapped message may read as a more generic sibling (the first 80 columns of Inductor's
    # "No valid triton configs. OutOfMemoryError: out of resource: ..." are any torch.compile failure).
    for i in range(len(lines) - 1):
        if not lines[i].text or not lines[i + 1].text:
            continue
        joined = Line(text=f"{lines[i].text} {lines[i + 1].text}", rank=lines[i].rank, host=lines[i].host)
        for sig, m in match_line(joined.text, index):
            consider(sig, m, joined, i + 1, _WRAP_PENALTY)
        if lines[i + 1].prefixes and lines[i + 1].prefixes != lines[i].prefixes:
            # The continuation opens with what reads as a log prefix that its line does not share: a wrap before
            # a time stamp in the message ("CANCELLED AT" / "2020-07-03T02:59:56 DUE TO TIME LIMIT ***").
            reread(f"{raw_lines[i].rstrip()} {raw_lines[i + 1].lstrip()}", i + 1)
    # Long lines a terminal wrapped at its width, rebuilt, are the printed text too, and may name a more specific
    # failure than a piece alone did (a wrapped torchrun summary whose first piece reads as any child failure).
    prefixed = [bool(line.prefixes) for line in lines]
    if len(lines) > 2:
        for start, _count, printed in SoftWrap.terminal(raw_lines, prefixed):
            reread(printed, start + 1)
    # A line a terminal wrapped once, inside a word ("TIME LIMI" / "T ***"): its two pieces concatenated.
    for start, printed in SoftWrap.cut_pairs(raw_lines, prefixed):
        reread(printed, start + 1)
    if not found:
        _normalized_pass(raw_lines, lines, index, consider, found)
    if not found and fuzzy:
        _fuzzy_pass(raw_lines, index, found)
    outside = _versions(found, index, raw_lines, versions) if found else set()
    # A root cause outranks fallout reported in the same text (a launcher summary pasted with the traceback),
    # as in `scan`; then an entry whose affected versions the text's do not contradict; then stronger evidence.
    # A tier's hits come before the next tier's, whatever the scores.
    ranked = sorted(
        found.values(),
        key=lambda r: (_TIER_ORDER[r.tier], r.role != "initiating", r.id in outside, -r.score, -r.specificity, r.id),
    )
    return ranked[: max(top, 0)]


# Every version line denpex_kb/versions.py reads contains one of these; without one, that module (and
# `packaging`) is not even imported, which keeps a plain `match` as fast to start as before.
_VERSION_HINTS = ("ersion", "[pip", "[conda]", "deepspeed info")


def _versions(found: dict[str, Match], index: KbIndex, raw_lines: list[str],
              given: Mapping[str, str] | None) -> set[str]:
    """Notes each answer's versions; returns the entries the versions seen fall outside of."""
    outside: set[str] = set()
    for m in found.values():  # the wording alone says which releases printed it
        if m.printed_by:
            said = ", ".join(f"{package} {spec}" for package, spec in m.printed_by)
            found[m.id] = m._replace(version_notes=(*m.version_notes, f"this wording is printed by {said}"))
    if not any(m.printed_by or ((info := index.by_id.get(m.id)) is not None and info.versions)
               for m in found.values()):
        return outside
    if not given and not any(h in line for line in raw_lines for h in _VERSION_HINTS):
        return outside
    from .versions import assess, printed_by_other, read_versions

    seen = {**read_versions(raw_lines), **(given or {})}
    if not seen:
        return outside
    for m in list(found.values()):
        info = index.by_id.get(m.id)
        notes = list(m.version_notes)
        if info is not None and info.versions:
            verdict = assess(dict(info.versions), seen)
            notes.extend(verdict.notes)
            if verdict.outside:
                outside.add(m.id)
        notes.extend(printed_by_other(dict(m.printed_by), seen))
        found[m.id] = m._replace(version_notes=tuple(notes))
    return outside


def _fuzzy_score(similarity: float, threshold: float) -> int:
    """Similarity in [threshold, 100] onto 1.._FUZZY_TOP, so a fuzzy answer never outscores a normalized one."""
    span = max(100.0 - threshold, 1.0)
    return max(1, min(_FUZZY_TOP, round(1 + (_FUZZY_TOP - 1) * (similarity - threshold) / span)))


def _fuzzy_pass(raw_lines: list[str], index: KbIndex, found: dict[str, Match]) -> None:
    """Only when the exact and normalized tiers found nothing: lines close to a known wording, then bare
    exception classes that are evidence for an entry."""
    fz = index.fuzzy
    if fz is None:
        return
    from .fuzzy import THRESHOLD

    for hit in fz.hits(enumerate(raw_lines, 1)):
        entry = index.entries[hit.known.entry]
        line = strip_prefixes(raw_lines[hit.line_number - 1])
        _best_per_entry(found, _entry_match(entry, line, hit.line_number, FUZZY, _fuzzy_score(hit.score, THRESHOLD),
                                            hit.known.text, hit.known.role))
    if found:
        return
    for number, raw in enumerate(raw_lines, 1):
        entries = fz.evidence_for(raw)
        for rank, k in enumerate(entries or ()):
            entry = index.entries[k]
            line = strip_prefixes(raw)
            exc = exception_type(line.text) or ""
            _best_per_entry(found, _entry_match(entry, line, number, EVIDENCE, _EVIDENCE_SCORE - rank, exc,
                                                "initiating"))


def _entry_match(entry: Any, line: Line, number: int, tier: str, score: int, signature: str, role: str) -> Match:
    values: dict[str, Any] = {}
    if line.rank is not None:
        values["rank"] = line.rank
    if line.host:
        values["host"] = line.host
    exc = exception_type(line.text)
    if exc:
        values["exception"] = exc
    return Match(id=entry.id, title=entry.title, phase=entry.phase, severity=entry.severity, score=score,
                 signature=signature, role=role, text=line.text, values=values, fix=entry.fix, url=entry.url,
                 specificity=0, line_number=number, retry=entry.retry, blame=entry.blame, tier=tier, pack=entry.pack)


def _normalized_pass(raw_lines: list[str], exact: list[Line], index: KbIndex, consider: Any,
                     found: dict[str, Match]) -> None:
    """Only when the exact pass found nothing: pasted-text artifacts undone, then soft wraps joined, then case
    ignored. Each step runs only if the ones before it found nothing."""
    lines = [_pasted_line(r) for r in raw_lines]
    matched: set[int] = set()
    for i, line in enumerate(lines):
        if line.text == exact[i].text:
            continue  # the exact pass has read this very text
        for sig, m in match_line(line.text, index):
            consider(sig, m, line, i + 1, tier=NORMALIZED)
            matched.add(i)
    for i in range(len(lines) - 1):
        if i in matched or i + 1 in matched or not lines[i].text or not lines[i + 1].text:
            continue
        if lines[i].text == exact[i].text and lines[i + 1].text == exact[i + 1].text:
            continue
        joined = Line(text=f"{lines[i].text} {lines[i + 1].text}", rank=lines[i].rank, host=lines[i].host)
        for sig, m in match_line(joined.text, index):
            consider(sig, m, joined, i + 1, _WRAP_PENALTY, tier=NORMALIZED)
    if found:
        return
    texts = [line.text for line in lines]
    windows = SoftWrap.joins(raw_lines, texts)
    for start, _count, joined_text in windows:
        joined = Line(text=joined_text, rank=lines[start].rank, host=lines[start].host)
        for sig, m in match_line(joined_text, index):
            consider(sig, m, joined, start + 1, _SOFT_WRAP_PENALTY, tier=NORMALIZED)
    if found:
        return
    for i, line in enumerate(lines):
        if not line.text:
            continue
        for sig, m in match_line_ignoring_case(line.text, index):
            consider(sig, m, line, i + 1, tier=NORMALIZED, case_penalty=_CASE_PENALTY)


def classify_line(index: KbIndex, text: str) -> tuple[Any, dict[str, Any]] | None:
    """The signature a normalised line is reported under, with the values of every signature of its entry that
    matched; None when no signature matches. Deterministic: the candidates are sorted first."""
    hits = sorted(match_line(text, index), key=lambda h: (h[0].entry.id, h[0].number, h[0].pattern))
    if not hits:
        return None
    sig, _m = max(hits, key=lambda h: (h[0].role == "initiating", score_for(h[0].specificity), h[0].specificity, h[0].entry.id))
    values: dict[str, Any] = {}
    for other, om in hits:  # every signature of the chosen entry that matched adds its values
        if other.entry is sig.entry:
            values.update({k: v for k, v in om.groupdict().items() if v is not None and k not in values})
    return sig, values
