"""The committed JSON Schema and the shipped bundle never drift from the model and kb/."""

from __future__ import annotations

import json
from importlib import resources

import jsonschema
import pytest
from ruamel.yaml import YAML

from conftest import KB, REPO
from denpex_kb.compiler import ENTRIES_FILE, INDEX_FILE, compile_kb, dumps
from denpex_kb.loader import load_kb
from denpex_kb.schema import render, vocabulary_tags

SCHEMA_FILE = REPO / "schema" / "entry.schema.json"


def test_committed_schema_matches_the_model():
    assert SCHEMA_FILE.read_text(encoding="utf-8") == render(vocabulary_tags(KB)), (
        "schema/entry.schema.json is stale: run `denpex-kb compile` and commit the result"
    )


@pytest.mark.parametrize("path", sorted(p for p in KB.glob("*.yaml") if not p.name.startswith("_")), ids=lambda p: p.stem)
def test_every_entry_validates_against_the_json_schema(path):
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    data = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    jsonschema.validate(data, schema)


def test_every_entry_starts_with_the_schema_line():
    for path in KB.glob("*.yaml"):
        if not path.name.startswith("_"):
            assert path.read_text(encoding="utf-8").startswith("# yaml-language-server: $schema=../schema/entry.schema.json\n"), path


def test_shipped_bundle_equals_a_fresh_compile():
    index, full = compile_kb(load_kb(KB))
    shipped = resources.files("denpex_kb").joinpath("data")
    assert shipped.joinpath(INDEX_FILE).read_text(encoding="utf-8") == dumps(index), (
        "the bundled index is stale: run `denpex-kb compile` and commit denpex_kb/data/"
    )
    assert shipped.joinpath(ENTRIES_FILE).read_text(encoding="utf-8") == dumps(full)


def test_knowledge_base_is_clean():
    from denpex_kb.validators import run_checks

    problems = list(run_checks(load_kb(KB)))
    assert problems == [], "\n".join(p.render() for p in problems)


def test_knowledge_base_is_in_canonical_format(capsys):
    from denpex_kb.cli import main

    assert main(["fmt", "--check", "--kb", str(KB)]) == 0, capsys.readouterr().out
