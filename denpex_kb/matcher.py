"""`match`: which failure a pasted line or block is, ranked by evidence."""

from __future__ import annotations

from typing import Any

from .bundle import CompiledSig, KbIndex, default_index
from .normalize import Line, exception_type, strip_prefixes

# Scores are 0-100. A signature hit scores by how much fixed text it matched: a long specific message is
# stronger evidence than a short generic one. Lines joined across a hard wrap score a little lower.
MIN_SCORE = 50
_WRAP_PENALTY = 5
MAX_BLOCK_LINES = 2_000


def score_for(specificity: int) -> int:
    return min(99, 55 + specificity // 2)


class Match:
    """One entry that `match` found in the text, with the evidence."""

    __slots__ = ("id", "title", "phase", "severity", "score", "signature", "role", "line", "values", "fix", "url",
                 "specificity", "line_number", "retry", "blame")

    def __init__(self, *, id: str, title: str, phase: str, severity: str, score: int, signature: str, role: str,
                 line: str, values: dict[str, Any] | None = None, fix: str = "", url: str = "", specificity: int = 0,
                 line_number: int = 1, retry: str | None = None, blame: str | None = None) -> None:
        self.id = id
        self.title = title
        self.phase = phase
        self.severity = severity
        self.score = score  # 0-100
        self.signature = signature  # the pattern that matched
        self.role = role  # the signature's role: initiating or collateral
        self.line = line  # the normalised line it matched
        self.values = values if values is not None else {}  # extracted values: sizes, ranks, codes
        self.fix = fix  # the one-line fix
        self.url = url  # the entry's page on the hub
        self.specificity = specificity
        self.line_number = line_number  # 1-based, within the text given
        self.retry = retry  # the entry's response: no | yes | elsewhere | depends
        self.blame = blame

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Match) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return f"Match(id={self.id!r}, score={self.score}, line={self.line[:60]!r}, values={self.values})"


def _values(m: Any, line: Line, exc: str | None) -> dict[str, Any]:
    values: dict[str, Any] = {k: v for k, v in m.groupdict().items() if v is not None}
    if line.rank is not None:
        values.setdefault("rank", line.rank)
    if line.host:
        values.setdefault("host", line.host)
    if exc:
        values.setdefault("exception", exc)
    return values


def match_line(text: str, index: KbIndex) -> list[tuple[CompiledSig, Any]]:
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


def match(text: str, *, top: int = 5, index: KbIndex | None = None) -> list[Match]:
    """The failures `text` (one line or a pasted block) shows, best first; [] when none is confidently matched."""
    index = index or default_index()
    raw_lines = text.splitlines()[:MAX_BLOCK_LINES] or [""]
    lines = [strip_prefixes(r) for r in raw_lines]
    found: dict[str, Match] = {}
    matched_lines: set[int] = set()

    def consider(sig: CompiledSig, m: Any, line: Line, number: int, penalty: int = 0) -> None:
        exc = exception_type(line.text)
        score = score_for(sig.specificity) - penalty
        if score < MIN_SCORE:
            return
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
                line=line.text,
                values=_values(m, line, exc),
                fix=sig.entry.fix,
                url=sig.entry.url,
                specificity=sig.specificity,
                line_number=number,
                retry=sig.entry.retry,
                blame=sig.entry.blame,
            ),
        )

    for i, line in enumerate(lines):
        for sig, m in match_line(line.text, index):
            consider(sig, m, line, i + 1)
            matched_lines.add(i)
    # A message hard-wrapped over two lines: try each unmatched line joined with the next one.
    for i in range(len(lines) - 1):
        if i in matched_lines or i + 1 in matched_lines or not lines[i].text or not lines[i + 1].text:
            continue
        joined = Line(text=f"{lines[i].text} {lines[i + 1].text}", rank=lines[i].rank, host=lines[i].host)
        for sig, m in match_line(joined.text, index):
            consider(sig, m, joined, i + 1, _WRAP_PENALTY)
    # A root cause outranks fallout reported in the same text (a launcher summary pasted with the traceback),
    # as in `scan`; then stronger evidence first.
    ranked = sorted(found.values(), key=lambda r: (r.role != "initiating", -r.score, -r.specificity, r.id))
    return ranked[: max(top, 0)]
