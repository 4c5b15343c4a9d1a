"""The command line's output formats, in one place: text, json, jsonl, junit and sarif.

As a pySigma backend declares its `formats` (a name and a description each) and implements one finalizer per
format, each command here has a `Formats` table: the names its `--format` accepts, a line of help for each, and
the writer that turns the command's result (a payload) into what is printed. The commands compute; this module
prints. It is imported by `match` and `scan`, which start on every failed job: only the standard library's
`json` and `typing` are imported at module level (ElementTree, urllib and the scanner's types load on use).

Every string that comes from a log, a file name or an entry goes through `terminal.visible` in text output and
`terminal.json_safe` in JSON output (see `denpex_kb.terminal`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TextIO, TypeVar

from .terminal import json_safe, visible
from .urls import HUB, REPORT_MISSING

if TYPE_CHECKING:
    from .bundle import EntryInfo, KbIndex
    from .examples import EntryResult
    from .matcher import Match
    from .problems import Problem
    from .scanner import Finding, ScanReport

P = TypeVar("P")

REPORT_ISSUE = REPORT_MISSING
CUT = "[...]"  # where a long line shown in text output was cut

# ---------------------------------------------------------------------------------------------------------------
# The registry


class Format(Generic[P]):
    """One `--format` value: its name, a line of help, and the writer (payload, stdout, stderr)."""

    __slots__ = ("help", "name", "write")

    def __init__(self, name: str, help: str, write: Callable[[P, TextIO, TextIO], None]) -> None:
        self.name, self.help, self.write = name, help, write


class Formats(Generic[P]):
    """The formats one command writes, by name, in the order `--help` lists them."""

    def __init__(self, *formats: Format[P]) -> None:
        self._by_name = {f.name: f for f in formats}

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._by_name)

    def describe(self) -> str:
        return "; ".join(f"{f.name}: {f.help}" for f in self._by_name.values())

    def write(self, name: str, payload: P, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self._by_name[name].write(payload, out or sys.stdout, err or sys.stderr)


# ---------------------------------------------------------------------------------------------------------------
# Shared pieces


MAX_TEXT_GROUPS = 50  # collateral groups the text report of a scan lists


def plural(n: int, word: str, words: str | None = None) -> str:
    """'1 finding', '2 findings', '0 entries' (with words='entries')."""
    return f"{n} {word if n == 1 else (words or word + 's')}"


def cut(text: str, width: int) -> str:
    """`text` cut to `width` characters, ending in `[...]` when something was left off."""
    if len(text) <= width:
        return text
    return f"{text[:width].rstrip()} {CUT}"


def json_text(value: Any, *, ascii_only: bool = False, default: Callable[[Any], Any] | None = None) -> str:
    """A JSON document, indented. ascii_only: every non-ASCII character escaped (check's long-standing form);
    otherwise UTF-8 with the controls JSON leaves raw (C1, bidi) escaped, harmless on a terminal."""
    if ascii_only:
        return json.dumps(value, indent=2, default=default)
    return json_safe(json.dumps(value, indent=2, ensure_ascii=False, default=default))


def json_line(value: Any) -> str:
    """One JSON Lines record: a single line (JSON escapes newlines; U+2028 and U+2029 are escaped too)."""
    return json_safe(json.dumps(value, ensure_ascii=False, default=str))


def ranges(ranks: Iterable[int]) -> str:
    """[0, 1, 2, 4, 5] -> '0-2,4-5'"""
    runs: list[list[int]] = []  # [first, last] of each run of consecutive ranks
    for r in sorted(set(ranks)):
        if runs and runs[-1][1] == r - 1:
            runs[-1][1] = r
        else:
            runs.append([r, r])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _write(out: TextIO, text: str) -> None:
    out.write(text)


def junit(problems: Sequence[Problem], suite_name: str) -> str:
    """A JUnit XML test suite: one failing test case per problem, or one passing case when there is none."""
    from xml.etree import ElementTree as ET

    suite = ET.Element("testsuite", name=suite_name, tests=str(max(len(problems), 1)), failures=str(len(problems)))
    if not problems:
        ET.SubElement(suite, "testcase", classname=suite_name, name="knowledge-base")
    for p in problems:
        case = ET.SubElement(suite, "testcase", classname=p.path, name=f"{p.code} {p.check} line {p.line}")
        failure = ET.SubElement(case, "failure", message=p.message, type=p.code)
        failure.text = p.render()
    return ET.tostring(suite, encoding="unicode") + "\n"


# ---------------------------------------------------------------------------------------------------------------
# check


class CheckResult(NamedTuple):
    problems: list[Problem]
    files: int

    @property
    def errors(self) -> int:
        from .problems import ProblemSeverity

        return sum(p.severity is ProblemSeverity.error for p in self.problems)


def _check_text(r: CheckResult, out: TextIO, err: TextIO) -> None:
    for p in r.problems:
        print(p.render(), file=out)
    errors = r.errors
    warnings = len(r.problems) - errors
    print(f"{plural(r.files, 'file')} checked: {plural(errors, 'error')}, {plural(warnings, 'warning')}", file=err)


def _check_json(r: CheckResult, out: TextIO, err: TextIO) -> None:
    doc = {"files": r.files, "errors": r.errors, "problems": [p.to_dict() for p in r.problems]}
    print(json_text(doc, ascii_only=True), file=out)


CHECK_FORMATS: Formats[CheckResult] = Formats(
    Format("text", "one problem a line as path:line:col, a summary on stderr", _check_text),
    Format("json", '{"files", "errors", "problems": [...]}', _check_json),
    Format("junit", "JUnit XML, one test case per problem", lambda r, out, err: _write(out, junit(r.problems, "denpex-kb check"))),
)


# ---------------------------------------------------------------------------------------------------------------
# test


class TestResult(NamedTuple):
    results: list[EntryResult]
    problems: list[Problem]
    benign_codes: frozenset[str] = frozenset()  # problems of the benign corpus, printed after the entries


def _test_text(r: TestResult, out: TextIO, err: TextIO) -> None:
    for e in r.results:
        mark = "ok  " if e.ok else "FAIL"
        fuzzy = f", {e.fuzzy_only} caught only by the fuzzy tier" if e.fuzzy_only else ""
        print(f"{mark} {e.id}: {plural(e.true_positives, 'true positive')}, {plural(e.false_negatives, 'false negative')}, "
              f"{plural(e.false_positives, 'false positive')}{fuzzy}", file=out)
        for o in e.outcomes:
            if not o.ok:
                text = cut(o.text.strip().splitlines()[0], 100) if o.text.strip() else ""
                if o.kind == "match":
                    close = f" (fuzzy tier: {o.fuzzy}; a signature is missing)" if o.fuzzy else ""
                    print(f"       expected {o.expected}, reported {o.reported or 'nothing'}{close}: {text}", file=out)
                else:
                    print(f"       no_match example matched {o.reported}: {text}", file=out)
    for p in r.problems:
        if p.code in r.benign_codes:  # the examples' own problems are the outcome lines above
            print(p.render(), file=out)
    failed = sum(not e.ok for e in r.results)
    print(f"{plural(len(r.results), 'entry', 'entries')} tested, {failed} failing; {plural(len(r.problems), 'problem')}", file=err)


def _test_json(r: TestResult, out: TextIO, err: TextIO) -> None:
    doc = {
        "entries": [
            {
                "id": e.id,
                "true_positives": e.true_positives,
                "false_negatives": e.false_negatives,
                "false_positives": e.false_positives,
                "fuzzy_only": e.fuzzy_only,
                "failures": [
                    {"kind": o.kind, "example": o.number + 1, "text": o.text, "expected": o.expected, "reported": o.reported,
                     "fuzzy": o.fuzzy}
                    for o in e.outcomes
                    if not o.ok
                ],
            }
            for e in r.results
        ],
        "problems": [p.to_dict() for p in r.problems],
    }
    print(json_text(doc), file=out)


TEST_FORMATS: Formats[TestResult] = Formats(
    Format("text", "one line per entry with its counts, then the failing examples", _test_text),
    Format("json", '{"entries": [...], "problems": [...]}', _test_json),
    Format("junit", "JUnit XML, one test case per problem", lambda r, out, err: _write(out, junit(r.problems, "denpex-kb test"))),
)


# ---------------------------------------------------------------------------------------------------------------
# match

# Answers below the exact tier say how they were found.
_TIER_NOTE = {"normalized": ", after undoing pasted-text artifacts", "fuzzy": ", fuzzy", "evidence": ", evidence only"}


class MatchResult(NamedTuple):
    query: str
    matches: list[Match]


def _match_text(r: MatchResult, out: TextIO, err: TextIO) -> None:
    if not r.matches:
        print("No known failure matches this text.", file=out)
        print(f"If it is a real failure, report it: {REPORT_ISSUE}", file=out)
        return
    v = visible
    for n, m in enumerate(r.matches):
        if n:
            print(file=out)
        print(f"{v(m.id)}  ({v(m.phase)}, score {m.score}{_TIER_NOTE.get(m.tier, '')})  {v(m.title)}", file=out)
        if m.pack:
            print(f"  pack:    {v(m.pack)} (an installed pack, not denpex-kb's own knowledge base)", file=out)
        print(f"  matched: {v(cut(m.text, 300))}", file=out)
        if m.tier == "fuzzy":
            print(f"  close to: {v(cut(m.signature, 300))}  (no signature matched; a known wording is this close)", file=out)
        elif m.tier == "evidence":
            print(f"  evidence: {v(m.signature)} alone, which this failure raises (the message was cut off?)", file=out)
        values = {k: val for k, val in m.values.items() if k != "exception"}
        if values:
            print("  values:  " + ", ".join(f"{v(k)}={v(val)}" for k, val in sorted(values.items())), file=out)
        for note in m.version_notes:
            print(f"  version: {v(note)}", file=out)
        print(f"  fix:     {v(m.fix)}", file=out)
        if m.retry:
            print(f"  retry:   {v(m.retry)} (blame: {v(m.blame)})", file=out)
        print(f"  more:    {v(m.url)}  (or: denpex-kb explain {v(m.id)})" if m.url else f"  more:    denpex-kb explain {v(m.id)}",
              file=out)


def _match_json(r: MatchResult, out: TextIO, err: TextIO) -> None:
    print(json_text({"query": r.query, "matches": [m.to_dict() for m in r.matches]}), file=out)


MATCH_FORMATS: Formats[MatchResult] = Formats(
    Format("text", "each match with its evidence, fix and hub page", _match_text),
    Format("json", '{"query": ..., "matches": [...]}', _match_json),
)


# ---------------------------------------------------------------------------------------------------------------
# scan


class ScanJob(NamedTuple):
    """One job of `scan`: its report, or None when none of its files could be read (`errors` says why)."""

    name: str
    files: list[str]
    report: ScanReport | None
    errors: Sequence[str] = ()  # why the job was not read at all (report is None)
    flight_lines: Sequence[str] = ()  # `--fr`: lines folded into the text report
    flight_doc: dict[str, Any] | None = None  # `--fr`: the analysis, for JSON


class ScanResult(NamedTuple):
    jobs: list[ScanJob]
    kb_index: KbIndex | None = None  # for the rules of SARIF output
    headers: bool = False  # text: a header line per job (`--each`)


def _where(f: Finding) -> str:
    who = f"rank {f.rank}" if f.rank is not None else "no rank prefix"
    place = f"{visible(f.file)}:{f.line_number}" if f.file else f"line {f.line_number}"
    return f"{who}, {place}"


# Said under an initiating failure that no signature named.
_NAMED_HOW = {
    "fuzzy": "fuzzy: no signature matched this line; it is close to a wording this entry knows",
    "evidence": "evidence only: the exception class is this entry's; the message did not match",
}


def _collateral_key(f: Finding) -> str:
    return f.id or f"unrecognised {f.exception}"


def _role_label(f: Finding) -> str:
    """How a finding's role reads; a log with nothing but fallout names its earliest symptom, not a cause."""
    if f.role != "initiating":
        return "Collateral"
    return "Earliest symptom" if f.fallout_only else "Initiating failure"


def render_scan(report: ScanReport) -> str:
    """The text report of one job."""
    out: list[str] = []
    init = report.initiating
    if report.verdict is not None:
        out.append(visible(report.verdict.headline()))
        out.extend(f"  (not acted on: {visible(line)})" for line in report.verdict.stale)
        out.append("")
    if init is None:
        out.append(f"No failure found in {plural(report.lines, 'line')}.")
    else:
        name = f"{init.id}: {init.title}" if init.id else f"unrecognised {init.exception or 'exception'} (no entry knows it yet)"
        out.append(f"{_role_label(init)}  {visible(name)}")
        if report.info and report.info.pack:
            out.append(f"  from the installed pack {visible(report.info.pack)}")
        out.append(f"  at   {_where(init)}")
        out.append(f"  line {visible(cut(init.text, 400))}")
        if init.tier in _NAMED_HOW:
            out.append(f"  ({_NAMED_HOW[init.tier]})")
        if init.without_traceback:
            out.append("  (the rank's last exception line, printed without a traceback)")
        if init.values.get("error_file"):
            out.append("  (the rank's own account: its TorchElastic error file, written by @record)")
        out.extend(f"  version {visible(note)}" for note in report.version_notes)
        info = report.info
        if info:
            out.append(f"\nFix   {visible(info.fix)}")
            out.extend(f"Verify  {visible(run)}" for run in info.verify)
            out.append(f"More  {visible(info.url)}  (or: denpex-kb explain {visible(info.id)})" if info.url
                       else f"More  denpex-kb explain {visible(info.id)}")
        elif init.id is None:
            out.append("\nThis is the first exception in the log. If it is a failure others will meet, report it:")
            out.append(f"  {REPORT_ISSUE}")
    for err in report.errors:
        out.append(f"Warning  {visible(err)}")
    for hint in report.hints:
        out.append(f"Note  {visible(hint)}")
    collateral = report.collateral
    if collateral:
        grouped: dict[str, list[Finding]] = {}
        for f in collateral:
            grouped.setdefault(_collateral_key(f), []).append(f)
        # A group folds several findings (one per signature or exception line); say both counts when they differ.
        groups = f", {len(grouped)} groups below" if len(grouped) != len(collateral) else ""
        out.append(f"\nCollateral ({plural(len(collateral), 'finding')}{groups})")
        for shown, (key, fs) in enumerate(grouped.items()):
            if shown == MAX_TEXT_GROUPS:  # a terminal is not the place for thousands: --json has them all
                out.append(f"  and {plural(len(grouped) - shown, 'more group')} (--json lists every finding)")
                break
            ranks = [r for f in fs for r in f.ranks]
            who = f"ranks {ranges(ranks)}" if len(set(ranks)) > 1 else (f"rank {ranks[0]}" if ranks else "")
            lines = sum(f.count for f in fs)
            first = min(fs, key=lambda f: f.order)
            where = f"first at {visible(first.file) + ':' if first.file else 'line '}{first.line_number}"
            out.append(f"  {who + ': ' if who else ''}{visible(key)} ({plural(lines, 'line')}, {where})")
    return "\n".join(out)


def _scan_text(r: ScanResult, out: TextIO, err: TextIO) -> None:
    for n, job in enumerate(r.jobs):
        if r.headers:
            if n:
                print(file=out)
            print(f"== {visible(job.name)}", file=out)
        if job.report is None:
            print(f"Not scanned: {visible('; '.join(job.errors))}", file=out)
            continue
        print(render_scan(job.report), file=out)
        if job.flight_lines:
            print(file=out)
            print("\n".join(visible(line) for line in job.flight_lines), file=out)


def _scan_json(r: ScanResult, out: TextIO, err: TextIO) -> None:
    # One job's report, as it has always been printed (`scan` refuses --json with --each).
    (job,) = r.jobs
    assert job.report is not None
    doc = job.report.to_dict()
    if job.flight_doc is not None:
        doc["flight_recorder"] = job.flight_doc
    print(json_text(doc, default=str), file=out)


# The record of one job: the columns of `denpex_kb.fleet.SCHEMA`, in its order, without pyarrow (fleet needs it).
# tests/test_output.py holds the two to the same names, version and values.
# 2: initiating_tier (how the entry was named: exact, fingerprint, fuzzy, evidence) and versions (the versions
# the log or --env named, as sorted "package==version" strings: the same value in JSON, Arrow and Spark) added.
RECORD_SCHEMA_VERSION = 3
RECORD_FIELDS = (
    "schema_version", "job", "files", "initiating_id", "initiating_title", "initiating_rank", "initiating_host",
    "initiating_line_number", "initiating_text", "initiating_tier", "fix", "url", "verdict_retry", "verdict_blame",
    "verdict_exclude", "collateral_ids", "collateral_count", "versions", "errors",
)


def empty_record(job: str, files: list[str], errors: Sequence[str]) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(RECORD_FIELDS)
    row.update(schema_version=RECORD_SCHEMA_VERSION, job=job, files=files, verdict_exclude=[], collateral_ids=[],
               collateral_count=0, versions=[], errors=list(errors))
    return row


def job_record(report: ScanReport, job: str, files: list[str] | None = None, errors: list[str] | None = None) -> dict[str, Any]:
    """A scan report as one record of the fleet schema (a dict of plain values), as `fleet.record` makes it."""
    row = empty_record(job, list(files if files is not None else report.files), [*(errors or []), *report.errors])
    init = report.initiating
    if init is not None:
        info = report.info
        row.update(
            initiating_id=init.id, initiating_title=init.title or init.exception, initiating_rank=init.rank,
            initiating_host=init.hosts[0] if init.hosts else None, initiating_line_number=init.line_number,
            initiating_text=init.text, initiating_tier=init.tier, fix=info.fix if info else None,
            url=info.url if info else None,
        )
    verdict = report.verdict
    if verdict is not None:
        row.update(verdict_retry=verdict.retry, verdict_blame=verdict.blame, verdict_exclude=list(verdict.exclude))
    row["versions"] = [f"{package}=={version}" for package, version in sorted(report.versions.items())]
    ids: list[str] = []
    collateral = report.collateral
    for f in collateral:
        key = f.id or f"?{f.exception or 'unknown'}"
        if key not in ids:
            ids.append(key)
    row.update(collateral_ids=ids, collateral_count=len(collateral))
    return row


def _scan_jsonl(r: ScanResult, out: TextIO, err: TextIO) -> None:
    for job in r.jobs:
        row = job_record(job.report, job.name, job.files) if job.report is not None else empty_record(job.name, job.files, job.errors)
        print(json_line(row), file=out)


# SARIF 2.1.0 (OASIS). Each finding is a result at its file and line; its entry is the rule, whose helpUri is the
# entry's hub page and whose help text is the fix. Exceptions no entry knows share one generic rule.
SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
UNKNOWN_RULE = "unrecognised-exception"
_LEVEL_BY_SEVERITY = {"critical": "error", "high": "error", "medium": "warning", "low": "note"}


def _artifact(name: str) -> dict[str, Any]:
    """A SARIF artifactLocation: a URI reference for a path; standard input has no URI, only a description."""
    if name.startswith("<") and name.endswith(">"):
        return {"description": {"text": name}}
    from pathlib import PurePath
    from urllib.parse import quote

    path = PurePath(name)
    if path.is_absolute():
        from pathlib import Path

        return {"uri": Path(name).as_uri()}
    return {"uri": quote(path.as_posix())}


def _rule(info: EntryInfo | None, entry_id: str) -> dict[str, Any]:
    if info is None:  # an id the index does not hold (a finding from another knowledge base)
        return {"id": entry_id, "shortDescription": {"text": entry_id}}
    help_text = f"Fix: {info.fix}" + "".join(f"\nVerify: {run}" for run in info.verify)
    rule: dict[str, Any] = {
        "id": info.id,
        "name": info.id,
        "shortDescription": {"text": info.title},
        "helpUri": info.url,
        "help": {"text": help_text},
        "defaultConfiguration": {"level": _LEVEL_BY_SEVERITY.get(info.severity, "warning")},
        "properties": {"phase": info.phase, "severity": info.severity, "tags": list(info.tags),
                       "retry": info.retry, "blame": info.blame},
    }
    if not info.url:  # a pack entry whose pack names no page
        del rule["helpUri"]
    if info.pack:
        rule["properties"]["pack"] = info.pack
    return rule


_UNKNOWN = {
    "id": UNKNOWN_RULE,
    "name": UNKNOWN_RULE,
    "shortDescription": {"text": "An exception no entry knows yet"},
    "helpUri": REPORT_ISSUE,
    "help": {"text": "No entry of the knowledge base knows this exception. Read the rank's traceback; if it is a "
                     f"failure others will meet, report it: {REPORT_ISSUE}"},
    "defaultConfiguration": {"level": "warning"},
}


def _message(f: Finding) -> str:
    what = f"{f.id}: {f.title}" if f.id else f"unrecognised {f.exception or 'exception'} (no entry knows it yet)"
    role = _role_label(f)
    ranks = f.ranks or ([f.rank] if f.rank is not None else [])
    who = f" on rank{'s' if len(ranks) > 1 else ''} {ranges(ranks)}" if ranks else ""
    folded = f" ({plural(f.count, 'line')})" if f.count > 1 else ""
    return f"{role}: {what}{who}{folded}"


def sarif_log(r: ScanResult) -> dict[str, Any]:
    from . import __version__

    rules: list[dict[str, Any]] = []
    rule_index: dict[str, int] = {}
    results: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    by_id = r.kb_index.by_id if r.kb_index is not None else {}
    for job in r.jobs:
        if job.report is None:
            notes.extend({"level": "error", "message": {"text": f"{job.name}: {e}"}} for e in job.errors)
            continue
        notes.extend({"level": "warning", "message": {"text": e}} for e in job.report.errors)
        for f in job.report.findings:
            rule_id = f.id or UNKNOWN_RULE
            if rule_id not in rule_index:
                rule_index[rule_id] = len(rules)
                rules.append(dict(_UNKNOWN) if f.id is None else _rule(by_id.get(f.id), f.id))
            location: dict[str, Any] = {"artifactLocation": _artifact(f.file or "<lines>")}
            if f.line_number >= 1:
                location["region"] = {"startLine": f.line_number, "snippet": {"text": f.text}}
            level = "note" if f.before_job else ("error" if f.role == "initiating" else "warning")
            results.append({
                "ruleId": rule_id,
                "ruleIndex": rule_index[rule_id],
                "level": level,
                "message": {"text": _message(f)},
                "locations": [{"physicalLocation": location}],
                "properties": {"job": job.name, "role": f.role, "rank": f.rank, "ranks": f.ranks, "count": f.count,
                               "tier": f.tier, "score": f.score, "exception": f.exception},
            })
    invocation: dict[str, Any] = {"executionSuccessful": all(j.report is not None for j in r.jobs)}
    if notes:
        invocation["toolExecutionNotifications"] = notes
    verdicts = [{"job": j.name, "verdict": j.report.verdict.to_dict() if j.report and j.report.verdict else None}
                for j in r.jobs]
    run = {
        "tool": {"driver": {"name": "denpex-kb", "version": __version__, "informationUri": HUB, "rules": rules}},
        "invocations": [invocation],
        "results": results,
        "properties": {"jobs": verdicts},
    }
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


def _scan_sarif(r: ScanResult, out: TextIO, err: TextIO) -> None:
    print(json_text(sarif_log(r), default=str), file=out)


SCAN_FORMATS: Formats[ScanResult] = Formats(
    Format("text", "the verdict, the initiating failure, its fix, then the collateral", _scan_text),
    Format("json", "the whole report of one job (the same as --json)", _scan_json),
    Format("jsonl", "one record a line per job, the columns of denpex_kb.fleet's schema (the same as --jsonl)", _scan_jsonl),
    Format("sarif", "SARIF 2.1.0: each finding at its file and line, its entry as the rule", _scan_sarif),
)
