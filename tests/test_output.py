"""denpex_kb.output: the formats of every command in one place; the fleet record without pyarrow; SARIF 2.1.0."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from xml.etree import ElementTree as ET

import jsonschema
import pytest
from test_scan import OOM, job_log

from denpex_kb import output, scan, scan_many
from denpex_kb.bundle import default_index

SARIF_SCHEMA = Path(__file__).parent / "schemas" / "sarif-schema-2.1.0.json"
UNKNOWN = ["[rank1]: Traceback (most recent call last):", '[rank1]:   File "x.py", line 1, in <module>', "[rank1]: KeyError: 'labels'"]


def sarif_validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SARIF_SCHEMA.read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def logs(tmp_path: Path) -> tuple[Path, Path]:
    failing = tmp_path / "job.log"
    failing.write_text("\n".join(job_log()) + "\n", encoding="utf-8")
    unknown = tmp_path / "sub dir" / "unk.log"  # a space: the SARIF uri must be percent-encoded
    unknown.parent.mkdir()
    unknown.write_text("\n".join(UNKNOWN) + "\n", encoding="utf-8")
    return failing, unknown


def test_formats_table_names_describes_and_writes():
    assert output.SCAN_FORMATS.names == ("text", "json", "jsonl", "sarif")
    assert output.CHECK_FORMATS.names == output.TEST_FORMATS.names == ("text", "json", "junit")
    assert output.MATCH_FORMATS.names == ("text", "json")
    assert "sarif: SARIF 2.1.0" in output.SCAN_FORMATS.describe()
    out, err = io.StringIO(), io.StringIO()
    output.MATCH_FORMATS.write("json", output.MatchResult("q", []), out, err)
    assert json.loads(out.getvalue()) == {"query": "q", "matches": []} and err.getvalue() == ""
    with pytest.raises(KeyError):
        output.MATCH_FORMATS.write("sarif", output.MatchResult("q", []), out, err)


def test_plural_cut_and_ranges():
    assert [output.plural(n, "finding") for n in (0, 1, 2)] == ["0 findings", "1 finding", "2 findings"]
    assert output.plural(1, "entry", "entries") == "1 entry" and output.plural(3, "entry", "entries") == "3 entries"
    assert output.cut("short", 10) == "short"
    assert output.cut("a" * 8 + "  tail", 9) == "a" * 8 + " [...]"
    assert output.ranges([5, 1, 2, 9, 10, 2]) == "1-2,5,9-10"


def test_text_report_counts_and_cut_lines():
    long_line = "[rank2]: " + OOM + " " + "x" * 500
    report = scan(["step 1", long_line])
    text = output.render_scan(report)
    line = next(row for row in text.splitlines() if row.startswith("  line "))
    assert line.endswith(" [...]") and len(line) <= len("  line ") + 400 + len(" [...]")
    assert output.render_scan(scan(["ok"])) == "No failure found in 1 line."
    grouped = output.render_scan(scan(job_log()))
    # 4 collateral findings fold into 2 listed groups (one per entry): both counts are said.
    assert "\nCollateral (4 findings, 2 groups below)\n" in grouped
    assert len([row for row in grouped.splitlines() if row.startswith("  ") and "first at" in row]) == 2
    lines = job_log()
    single = output.render_scan(scan([row for row in lines if "OutOfMemoryError" in row or row.startswith("[rank0]:[E")]))
    assert "\nCollateral (1 finding)\n  rank 0: nccl-watchdog-timeout (1 line, " in single


def test_junit_has_one_case_per_problem():
    from denpex_kb.problems import Problem

    problems = [Problem("kb/a.yaml", 3, 1, "DKB003", "schema", "bad severity")]
    suite = ET.fromstring(output.junit(problems, "denpex-kb check"))
    assert (suite.get("tests"), suite.get("failures")) == ("1", "1")
    assert suite.find("testcase/failure").get("type") == "DKB003"
    empty = ET.fromstring(output.junit([], "denpex-kb check"))
    assert (empty.get("failures"), len(empty.findall("testcase/failure"))) == ("0", 0)


def test_record_is_fleet_record_without_pyarrow(tmp_path: Path):
    from denpex_kb import fleet

    assert list(output.RECORD_FIELDS) == [f.name for f in fleet.SCHEMA]
    assert output.RECORD_SCHEMA_VERSION == fleet.SCHEMA_VERSION
    failing, _ = logs(tmp_path)
    missing = tmp_path / "gone.log"
    cases = [scan(job_log()), scan(UNKNOWN), scan(["ok"]), scan_many([failing, missing])]
    for report in cases:
        assert output.job_record(report, "j") == fleet.record(report, "j")
        assert output.job_record(report, "j", ["a"], ["e"]) == fleet.record(report, "j", ["a"], ["e"])
    assert cases[3].errors == [f"{missing}: no such file"]
    empty = output.empty_record("j", ["x"], ["x: no such file"])
    assert list(empty) == list(output.RECORD_FIELDS) and empty["schema_version"] == fleet.SCHEMA_VERSION
    assert empty == fleet._empty_row("j", ["x"], ["x: no such file"])


def sarif_of(jobs: list[output.ScanJob]) -> dict:
    out = io.StringIO()
    output.SCAN_FORMATS.write("sarif", output.ScanResult(jobs, default_index()), out, io.StringIO())
    return json.loads(out.getvalue())


def test_sarif_is_valid_2_1_0_with_entries_as_rules(tmp_path: Path):
    failing, unknown = logs(tmp_path)
    report = scan_many([str(failing), str(unknown)])
    stdin = scan_many([io.BytesIO(("[rank0]: " + OOM + "\n").encode())])
    doc = sarif_of([
        output.ScanJob("#0", [str(failing), str(unknown)], report),
        output.ScanJob("<stdin>", ["<stdin>"], stdin),
        output.ScanJob("gone", ["gone.log"], None, ["gone.log: no such file"]),
    ])
    sarif_validator().validate(doc)
    assert doc["version"] == "2.1.0"
    (run,) = doc["runs"]
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    info = default_index().by_id["cuda-out-of-memory"]
    oom = rules["cuda-out-of-memory"]
    assert oom["helpUri"] == info.url and info.fix in oom["help"]["text"]
    assert oom["shortDescription"]["text"] == info.title
    assert rules[output.UNKNOWN_RULE]["helpUri"] == output.REPORT_ISSUE
    for result in run["results"]:
        assert run["tool"]["driver"]["rules"][result["ruleIndex"]]["id"] == result["ruleId"]
    first = run["results"][0]
    assert (first["ruleId"], first["level"]) == ("cuda-out-of-memory", "error")
    location = first["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == failing.as_uri()
    assert location["region"]["startLine"] == report.initiating.line_number
    unknowns = [r for r in run["results"] if r["ruleId"] == output.UNKNOWN_RULE]
    assert len(unknowns) == 1 and "KeyError" in unknowns[0]["message"]["text"]
    assert unknowns[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith("/sub%20dir/unk.log")
    assert unknowns[0]["locations"][0]["physicalLocation"]["region"]["startLine"] == 3
    from_stdin = [r for r in run["results"] if r["properties"]["job"] == "<stdin>"]
    assert from_stdin[0]["locations"][0]["physicalLocation"]["artifactLocation"] == {"description": {"text": "<stdin>"}}
    (invocation,) = run["invocations"]
    assert invocation["executionSuccessful"] is False
    assert {"level": "error", "message": {"text": "gone: gone.log: no such file"}} in invocation["toolExecutionNotifications"]
    # Every uri is an RFC 3986 reference: no spaces or other characters that need escaping.
    uris = re.findall(r'"uri": "([^"]*)"', json.dumps(doc))
    assert uris and all(re.fullmatch(r"[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]+", u) for u in uris)


def test_sarif_relative_paths_stay_relative(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("rank0.log").write_text("[rank0]: " + OOM + "\n", encoding="utf-8")
    doc = sarif_of([output.ScanJob("rank0.log", ["rank0.log"], scan_many(["rank0.log"]))])
    sarif_validator().validate(doc)
    assert doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "rank0.log"


def test_the_sarif_check_can_fail():
    # The validator really applies the schema: a wrong level and a missing version are refused.
    doc = sarif_of([output.ScanJob("x", ["x"], scan(["[rank0]: " + OOM]))])
    bad = json.loads(json.dumps(doc))
    bad["runs"][0]["results"][0]["level"] = "fatal"
    with pytest.raises(jsonschema.ValidationError):
        sarif_validator().validate(bad)
    del doc["version"]
    with pytest.raises(jsonschema.ValidationError):
        sarif_validator().validate(doc)


def test_json_line_is_one_line_and_terminal_safe():
    text = output.json_line({"t": "a\nb\u2028c\u202ed\x9b"})
    assert "\n" not in text and "\u2028" not in text and "\u202e" not in text and "\x9b" not in text
    assert json.loads(text) == {"t": "a\nb\u2028c\u202ed\x9b"}


def test_the_text_report_lists_a_bounded_number_of_collateral_groups(tmp_path):
    from denpex_kb import scan
    from denpex_kb.output import MAX_TEXT_GROUPS, render_scan

    log = tmp_path / "distinct.log"
    log.write_text("".join(f"[rank{i % 64}]: Traceback (most recent call last):\n[rank{i % 64}]: mymod.Weird{i}Error: "
                           f"boom {i}\n" for i in range(300)), encoding="utf-8")
    report = scan(log)
    text = render_scan(report)
    listed = [line for line in text.splitlines() if "unrecognised mymod.Weird" in line and "first at" in line]
    assert len(listed) == MAX_TEXT_GROUPS
    assert f"and {len(report.collateral) - MAX_TEXT_GROUPS} more groups (--json lists every finding)" in text
    assert len(report.to_dict()["findings"]) == 300  # the report itself keeps them


def test_old_line_names_still_read_with_a_warning() -> None:
    """`Finding.line` (a number) and `Match.line` (a text) were renamed; the old names warn and give the value."""
    import warnings

    import denpex_kb

    m = denpex_kb.match("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB.")[0]
    report = denpex_kb.scan(["hello", "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB."])
    assert report.initiating is not None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert m.line == m.text and report.initiating.line == report.initiating.line_number == 2
    assert [w.category for w in caught] == [DeprecationWarning, DeprecationWarning]
    assert "text" in m.to_dict() and "line" not in m.to_dict()
    assert "line_number" in report.initiating.to_dict() and "line" not in report.initiating.to_dict()
