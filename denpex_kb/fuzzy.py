"""The fuzzy tier: a line close to a wording some entry already knows, when no signature matches it.

A user's line often says what a signature says in other words: a newer release's wording, another framework's
phrasing of the same failure, a clause added or cut. Both sides are reduced to a *skeleton*: pasted-text
artifacts undone, launcher prefixes stripped, every variable part (numbers, sizes, paths, hex, addresses) masked
by the named masks of `masks.py`, case folded. A line is compared with the skeletons of every signature's
fixed text and of every real example line, retrieved by their rarest shared words, so no scorer ever runs over
the whole knowledge base. The comparison is rapidfuzz's alignment of the shorter text inside the longer one,
weighed by how much of the known wording's rare vocabulary the line contains.

The tier runs only when the exact and normalized tiers found nothing, and its answers say so: `tier: "fuzzy"`,
scored below every exact and normalized hit. The threshold is calibrated on the knowledge base's own
`no_match` examples and the benign corpus (`benchmarks/accuracy/calibrate.py`); it is not tuned on held-out text.

Below it, *exception evidence*: a line that is nothing but a known exception class (its message cut off) is
evidence for the one or two entries whose real examples raise that class, and is labelled `tier: "evidence"`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from rapidfuzz import fuzz

from .masks import masked_spans
from .normalize import exception_type, strip_prefixes
from .paste import normalize_line

FUZZY_FORMAT = 1

# A fuzzy answer needs this much (0-100) of both measures below; see the module docstring for how it was set.
THRESHOLD = 80.0
MARGIN = 5.0
# A line shorter than a known wording must align within this leading share of it, counted from where its message
# starts: after a leading exception class or logger name ("runtimeerror: ", "warning:torch.distributed....api:"),
# which a pasted line often leaves out ("CUDA error: invalid device ordinal" is "RuntimeError: CUDA error: ...").
_CUT_OFF_START = 0.25
_LEAD = re.compile(r"^(?:[a-z_][\w.]*:\s*)+")
# Rarest query words used to retrieve candidates, and candidates scored per line: bounded work per line.
_QUERY_WORDS = 8
_CANDIDATES = 24
_COMMON_SHARE = 0.05  # words in more than this share of the known wordings are not used to retrieve
# A skeleton with fewer content words than this says too little to be compared.
_MIN_WORDS = 3
# Content words: two or more letters or digits, not a mask token (those become `{num}` etc.), not a two-letter
# function word. Two-letter words stay because some decide the meaning: EDAC's "UE" against "CE", "IB", "HW".
_WORDS = re.compile(r"(?<!\{)\b[a-z][a-z0-9_]+\b(?!\})")
_FUNCTION_WORDS = frozenset(["an", "as", "at", "be", "by", "do", "if", "in", "is", "it", "no", "of", "on", "or", "so", "to", "up", "we"])
_SPACE = re.compile(r"\s+")
# Lines of a traceback that name code, not the failure: never compared.
_FRAME = re.compile(r"^(?:file \"|traceback \(most recent call last\)|\^+$|~+$|during handling of|the above exception)")


# Values that are the failure itself, not a variable part of its wording: `loss: nan` must not look like
# `loss: 0.31`.
_KEPT = {"nan", "inf", "-inf"}


def _mask(text: str) -> str:
    out, last = [], 0
    for start, end, name in masked_spans(text):
        if text[start:end].lower() in _KEPT:
            continue
        out += [text[last:start], "{" + name + "}"]
        last = end
    out.append(text[last:])
    return "".join(out)


def skeleton(text: str) -> str:
    """`text` (one line) as the fuzzy tier compares it: artifacts undone, prefixes stripped, variables masked
    (failure values such as nan kept), case folded, whitespace collapsed."""
    stripped = strip_prefixes(normalize_line(text)).text
    return _SPACE.sub(" ", _mask(stripped)).strip().lower()


def _lead(sk: str) -> int:
    """Where a skeleton's message starts: the length of its leading exception class or logger names."""
    m = _LEAD.match(sk)
    return m.end() if m else 0


def _classes(words: list[str]) -> set[str]:
    """The exception class names among a skeleton's words (`runtimeerror`, `oserror`, `ncclinternalerror`)."""
    return {w for w in words if w.endswith(("error", "exception")) and len(w) > len("error")}


def content_words(sk: str) -> list[str]:
    return [w for w in _WORDS.findall(sk) if w not in _FUNCTION_WORDS]


# A line its program logs as information reports no failure that a signature did not already claim: failures
# logged at INFO level (NCCL's "retrying") are signatures' business, and INFO lines are most of a healthy log.
# A level is a word of its own near the start of the line (not `NCCL_DEBUG=INFO` inside a message), in any case
# since pastes get lowercased.
_INFO = re.compile(r"(?:^|[\s\[|(-])(?<!more\s)(?:info|debug|trace)(?:[\s\]:|)-]|$)|^[id]\d{4} ", re.IGNORECASE)
_LEVEL_REACH = 60


def informational(text: str) -> bool:
    return _INFO.search(strip_prefixes(text).text[:_LEVEL_REACH]) is not None


def comparable(sk: str) -> bool:
    return len(content_words(sk)) >= _MIN_WORDS and not _FRAME.match(sk)


class Known(NamedTuple):
    """One wording an entry knows: a signature's fixed text or a real example line, as a skeleton."""

    entry: int  # position in KbIndex.entries
    role: str  # the role of the signature behind it: initiating or collateral
    origin: str  # "signature:<n>" or "example:<n>"
    text: str  # the skeleton


class Hit(NamedTuple):
    known: Known
    score: float  # 0-100
    line_number: int  # 1-based within the pasted text
    text: str  # the pasted line, prefixes stripped


class FuzzyIndex:
    """Skeletons of every known wording, an inverted index over their content words, and exception evidence."""

    def __init__(self, data: dict[str, Any]) -> None:
        if data.get("format") != FUZZY_FORMAT:
            raise ValueError(f"fuzzy index format {data.get('format')!r} is not {FUZZY_FORMAT}; recompile")
        self.known = [Known(*row) for row in data["known"]]
        self.evidence: dict[str, list[int]] = data["evidence"]
        postings: dict[str, list[int]] = {}
        self._words = [content_words(known.text) for known in self.known]  # each wording's, computed once
        self._leads = [_lead(known.text) for known in self.known]
        for k, words in enumerate(self._words):
            for word in set(words):
                postings.setdefault(word, []).append(k)
        n = max(1, len(self.known))
        self._idf = {word: math.log(1 + n / len(ids)) for word, ids in postings.items()}
        self._postings = postings
        # A word most wordings share retrieves nothing useful and costs a walk over all of them.
        self._common = max(_CANDIDATES, int(_COMMON_SHARE * len(self.known)))
        # An unseen word weighs as much as the median word occurrence in the known wordings (not the median
        # vocabulary entry: most of a vocabulary is rare names, which would make every new word decisive).
        occurrences = sorted(self._idf[w] for w, ids in postings.items() for _ in ids)
        self._unseen = occurrences[len(occurrences) // 2] if occurrences else 1.0

    def _candidates(self, words: set[str], exclude: frozenset[int]) -> list[int]:
        """The known wordings that share the most rare vocabulary with `words`, at most _CANDIDATES."""
        rare = sorted((w for w in words if w in self._idf and len(self._postings[w]) <= self._common),
                      key=lambda w: -self._idf[w])[:_QUERY_WORDS]
        overlap: dict[int, float] = {}
        for word in rare:
            weight = self._idf[word]
            for k in self._postings[word]:
                if k not in exclude:
                    overlap[k] = overlap.get(k, 0.0) + weight
        return sorted(overlap, key=lambda k: (-overlap[k], k))[:_CANDIDATES]

    def _covered(self, words: list[str], by: set[str]) -> float:
        """The share (0-100) of `words`, weighted by rarity, that `by` has. A word no known wording has weighs as
        much as a typical one: it may be a clause a release added, or a word that changes the meaning."""
        weights = {w: self._idf.get(w, self._unseen) for w in words}
        total = sum(weights.values())
        return 100.0 * sum(v for w, v in weights.items() if w in by) / total if total else 0.0

    def score(self, k: int, sk: str) -> float:
        """The shorter text aligned inside the longer one; then the lowest of the alignment's similarity and the
        rare-word coverage both ways, within the aligned window: a word the known wording lacks ("invalid
        *configuration* argument") or a word of it the line lacks both count against it."""
        known = self.known[k].text
        shorter, longer = (known, sk) if len(known) <= len(sk) else (sk, known)
        aligned = fuzz.partial_ratio_alignment(shorter, longer)
        if aligned is None:
            return 0.0
        lead = self._leads[k]
        if shorter is sk and aligned.dest_start > lead + _CUT_OFF_START * (len(known) - lead):
            # A line shorter than the wording it resembles is that wording cut off, so it starts where the
            # wording starts; a tail that many messages share ("compile with TORCH_USE_CUDA_DSA") names none.
            return 0.0
        window = longer[aligned.dest_start:aligned.dest_end]
        short_words = self._words[k] if shorter is known else content_words(shorter)
        window_words = content_words(window)
        if _KEPT.intersection(short_words).symmetric_difference(_KEPT.intersection(window_words)):
            return 0.0  # nan on one side only: the value that makes it a failure differs
        short_classes, window_classes = _classes(short_words), _classes(window_words)
        if short_classes and window_classes and not short_classes & window_classes:
            return 0.0  # "Caught RuntimeError in ..." is not "Caught OSError in ...": another exception, another failure
        return min(aligned.score, self._covered(short_words, set(window_words)),
                   self._covered(window_words, set(short_words)))

    def nearest(self, sk: str, exclude: frozenset[int] = frozenset()) -> list[tuple[int, float]]:
        """(known wording, score) for the candidates of one skeleton, best first."""
        words = set(content_words(sk))
        scored = [(k, self.score(k, sk)) for k in self._candidates(words, exclude)]
        scored.sort(key=lambda ks: (-ks[1], ks[0]))
        return scored

    def answer(self, sk: str, exclude: frozenset[int] = frozenset(),
               threshold: float = THRESHOLD) -> tuple[int, float] | None:
        """The known wording one skeleton is close to, or None: at or above `threshold`, and clear of the best
        wording of every other entry by MARGIN (a line that two entries print alike names neither)."""
        ranked = self.nearest(sk, exclude)
        if not ranked or ranked[0][1] < threshold:
            return None
        k, score = ranked[0]
        entry = self.known[k].entry
        runner_up = next((s for j, s in ranked[1:] if self.known[j].entry != entry), 0.0)
        return (k, score) if score - runner_up >= MARGIN else None

    def hits(self, lines: Iterable[tuple[int, str]], *, threshold: float = THRESHOLD,
             exclude: frozenset[int] = frozenset()) -> Iterator[Hit]:
        """For each (line number, line) that is comparable and close to a known wording, that wording."""
        for number, raw in lines:
            found = self.answer_raw(raw, exclude, threshold)
            if found is not None:
                yield Hit(self.known[found[0]], found[1], number, strip_prefixes(raw).text)

    def answer_raw(self, raw: str, exclude: frozenset[int] = frozenset(),
             threshold: float = THRESHOLD) -> tuple[int, float] | None:
        """`answer` for one raw line, if it is a line the fuzzy tier compares at all (not an INFO line, enough
        content words, not a traceback frame)."""
        if informational(raw):
            return None
        sk = skeleton(raw)
        return self.answer(sk, exclude, threshold) if comparable(sk) else None

    def evidence_for(self, raw: str) -> list[int] | None:
        """The entries a bare exception line is evidence for: the line is an exception class and nothing else
        (its message cut off or empty), and that class is raised in the real examples of at most two entries."""
        text = strip_prefixes(normalize_line(raw)).text.rstrip(" .:")
        exc = exception_type(text)
        if exc is None or text != exc:
            return None
        return self.evidence.get(exc)


def export_tables(data: dict[str, Any]) -> dict[str, Any]:
    """What a reimplementation of this tier needs beyond `data` (a compiled fuzzy index) to score as `FuzzyIndex`
    does: the rarity weight of a word by how many known wordings hold it, the weight of an unseen word, and the
    tier's constants. The weights are exported as computed here, so another language's logarithm cannot differ
    from this one's in the last bit. Reads only; matching is not changed by it."""
    fz = FuzzyIndex(data)
    by_count = {str(len(ids)): fz._idf[word] for word, ids in fz._postings.items()}
    return {
        "idf_by_count": by_count, "unseen": fz._unseen, "common": fz._common,
        "threshold": THRESHOLD, "margin": MARGIN, "cut_off_start": _CUT_OFF_START, "query_words": _QUERY_WORDS,
        "candidates": _CANDIDATES, "min_words": _MIN_WORDS, "level_reach": _LEVEL_REACH,
        "kept": sorted(_KEPT), "function_words": sorted(_FUNCTION_WORDS),
    }
