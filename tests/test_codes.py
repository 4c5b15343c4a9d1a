"""The code table is the only source of problem codes: for the loader, the checks, `test`, CONTRIBUTING.md and the hub."""

from __future__ import annotations

import re

import pytest

from conftest import REPO, variant
from denpex_kb.codes import BY_CODE, BY_NAME, CODES, ProblemSeverity, code_url, lookup
from denpex_kb.contributing import CONTRIBUTING, with_codes_table
from denpex_kb.errors import UnknownCodeError
from denpex_kb.loader import load_kb
from denpex_kb.problems import Problem
from denpex_kb.site.build import codes_page
from denpex_kb.validators import EntryCheck, iter_checks, register, run_checks

PACKAGE = REPO / "denpex_kb"
_CODE = re.compile(r"DKB\d{3}")


def test_codes_and_names_are_unique_and_each_row_is_complete():
    assert len(BY_CODE) == len(CODES) and len(BY_NAME) == len(CODES)
    assert [c.code for c in CODES] == sorted(c.code for c in CODES)
    for c in CODES:
        assert _CODE.fullmatch(c.code), c
        assert re.fullmatch(r"[a-z]+(?:-[a-z]+)*", c.name), c
        assert isinstance(c.severity, ProblemSeverity)
        for sentence in (c.description, c.fix):
            assert (sentence[:1].isupper() or sentence[:1] == "`") and sentence.endswith(".") and "\n" not in sentence, c


def test_an_undeclared_code_cannot_be_emitted():
    with pytest.raises(UnknownCodeError, match="DKB999"):
        Problem("kb/x.yaml", 1, 1, "DKB999", "made-up", "a problem nobody declared")
    with pytest.raises(UnknownCodeError):
        Problem.of("DKB999", "kb/x.yaml", 1, 1, "a problem nobody declared")
    with pytest.raises(UnknownCodeError):
        lookup("dkb103")  # codes are exact


def test_a_check_with_an_undeclared_code_cannot_register():
    class Undeclared(EntryCheck):
        code = "DKB998"

    with pytest.raises(UnknownCodeError):
        register(Undeclared)


def test_a_check_cannot_declare_its_own_name_or_description():
    class SelfNamed(EntryCheck):
        code = "DKB004"
        name = "my-own-name"

    with pytest.raises(TypeError, match="code table"):
        register(SelfNamed)


def test_every_code_in_the_package_is_declared_and_every_declared_code_is_emitted():
    used: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        if path.name == "codes.py":
            continue
        for code in _CODE.findall(path.read_text(encoding="utf-8")):
            used.setdefault(code, set()).add(str(path.relative_to(REPO)))
    undeclared = {code: files for code, files in used.items() if code not in BY_CODE}
    assert not undeclared, f"codes used but not declared in denpex_kb/codes.py: {undeclared}"
    assert set(BY_CODE) <= set(used), f"declared but never emitted: {sorted(set(BY_CODE) - set(used))}"


def test_each_check_takes_its_name_description_and_severity_from_its_code():
    for check in iter_checks():
        declared = lookup(check.code)
        assert (check.name, check.description) == (declared.name, declared.description)


def test_a_problem_carries_its_codes_severity_fix_and_page(monkeypatch):
    warning = Problem.of("DKB006", "kb/x.yaml", 1, 1, "the first line must be the schema comment")
    assert warning.severity is ProblemSeverity.warning and warning.check == "schema-comment"
    assert warning.fix == lookup("DKB006").fix
    assert warning.url == "https://denpex-kb.github.io/denpex-kb/codes/#dkb006"
    assert warning.render() == (
        "kb/x.yaml:1:1: warning DKB006 [schema-comment] the first line must be the schema comment "
        "(see https://denpex-kb.github.io/denpex-kb/codes/#dkb006)"
    )
    assert warning.to_dict() == {
        "path": "kb/x.yaml", "line": 1, "col": 1, "code": "DKB006", "check": "schema-comment",
        "message": "the first line must be the schema comment", "severity": "warning",
        "fix": lookup("DKB006").fix, "url": warning.url,
    }
    monkeypatch.setenv("DENPEX_KB_HUB_URL", "https://hub.example.org/kb")
    assert code_url("DKB103") == "https://hub.example.org/kb/codes/#dkb103"


def test_every_problem_of_a_broken_kb_has_place_severity_fix_and_url(make_kb):
    broken = variant(("id: demo-device-mismatch", "id: broken-one"), ("tags: [pytorch, tensors, crash]", "tags: [crashy]"))
    broken = broken.replace("# yaml-language-server: $schema=../schema/entry.schema.json\n", "")
    root = make_kb({"broken-one.yaml": broken, "not-yaml.yaml": "id: [unclosed\n"})
    problems = run_checks(load_kb(root))
    assert {"DKB001", "DKB006", "DKB103"} <= {p.code for p in problems}
    for p in problems:
        assert p.line >= 0 and p.col >= 0 and p.path.endswith(".yaml"), p
        assert p.severity is lookup(p.code).severity and p.fix == lookup(p.code).fix
        assert p.render().startswith(f"{p.path}:{p.line}:{p.col}: {p.severity.value} {p.code} ")
        assert p.render().endswith(f"(see {code_url(p.code)})")


def test_contributing_lists_the_codes_of_the_table():
    text = CONTRIBUTING.read_text(encoding="utf-8")
    assert with_codes_table(text) == text, (
        "the code table in CONTRIBUTING.md is out of date: run `python -m denpex_kb.contributing`"
    )
    for c in CODES:
        assert f"| [{c.code}](https://denpex-kb.github.io/denpex-kb/codes/#{c.anchor}) | `{c.name}` |" in text


def test_contributing_check_mode_reports_a_stale_table(tmp_path, capsys):
    from denpex_kb.contributing import BEGIN, END, main

    stale = tmp_path / "CONTRIBUTING.md"
    stale.write_text(f"# Contributing\n\n{BEGIN}\n| Code | Meaning |\n{END}\n\nMore.\n", encoding="utf-8")
    assert main([str(stale), "--check"]) == 1
    assert main([str(stale)]) == 0
    assert main([str(stale), "--check"]) == 0
    text = stale.read_text(encoding="utf-8")
    assert text.startswith("# Contributing\n\n") and text.endswith(f"{END}\n\nMore.\n") and "DKB205" in text


def test_the_hub_has_a_section_per_code_at_the_anchor_problems_link_to():
    page = codes_page()
    for c in CODES:
        # toc slugifies the heading `## DKB103` to `dkb103`, the anchor of code_url
        assert f"\n## {c.code}\n" in page and c.anchor == c.code.lower()
        assert c.fix in page and c.description in page
