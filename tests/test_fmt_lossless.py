"""`denpex-kb fmt` never changes what an entry says: data and comments survive, and a second run is a no-op."""

from __future__ import annotations

import io
import os
import random
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from conftest import KB, variant
from denpex_kb.cli import main
from denpex_kb.formatting import format_text
from denpex_kb.loader import load_entry_file
from denpex_kb.model import Entry
from denpex_kb.yamlio import YamlProblem, load_text, to_plain

ENTRY_FILES = sorted(p for p in KB.glob("*.yaml") if not p.name.startswith("_"))


@pytest.mark.parametrize("path", ENTRY_FILES, ids=lambda p: p.stem)
def test_real_entry_survives_fmt(path: Path, tmp_path: Path) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    copy = root / path.name
    shutil.copy(path, copy)
    before, problems = load_entry_file(copy, root)
    if before is None:
        pytest.skip(f"{path.name} does not load ({problems[0].render()}); `check` reports it")
    assert main(["fmt", str(copy)]) == 0
    after, problems = load_entry_file(copy, root)
    assert after is not None, [p.render() for p in problems]
    assert after.entry == before.entry
    formatted = copy.read_text(encoding="utf-8")
    assert format_text(formatted) == formatted
    assert main(["fmt", "--check", str(copy)]) == 0


# --- generated entries ------------------------------------------------------------------------------------------

TRICKY = [
    "", " leading space", "trailing space ", "key: value", "# not a comment", "a # b", "'single'", '"double"',
    "{braces}", "[brackets]", "- dash", "| pipe", "> gt", "@at", "`tick`", "%pct", "&anchor", "*alias", "!tag",
    "yes", "null", "~", "0.10", "1e3", "0x1F", "line1\nline2", "\n", "\n\nlead", "trail\n\n", "  indented\n  block",
    "tab\there", "crlf\r\nline", "ünïcødé ✓ 日本語", "emoji 🚀", "\u2028sep", "\x85nel", "zero\x00byte", "\ufeffbom",
    "ends with colon:", "---", "...", "?question", "a\n  b\n    c\n", "x\n#y\n",
]

text = st.one_of(
    st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=40),
    st.text(alphabet=" :#'\"\n\t-{}[]|>&*!%@`,?\\xyé日", max_size=30),
    st.sampled_from(TRICKY),
)
lines = st.lists(text, min_size=1, max_size=3)


@st.composite
def entries(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "id": "generated-entry",
        "title": draw(text),
        "summary": draw(text),
        "phase": "forward",
        "tags": ["pytorch"],
        "severity": "high",
        "status": "draft",
        "since": "0.1.0",
        "signatures": [
            {"kind": "literal", "text": draw(text), "note": draw(text)},
        ],
        "symptoms": draw(lines),
        "causes": draw(lines),
        "conditions": {"notes": draw(lines), "versions": {"torch": ">=2.0"}, "scale": draw(text)},
        "checklist": draw(lines),
        "fix": {
            "summary": draw(text),
            "body": draw(text),
            "variants": [{"framework": "deepspeed", "body": draw(text)}],
        },
        "commands": [{"purpose": "verify", "description": draw(text), "run": draw(text)}],
        "related": [{"id": "other-entry", "relation": "sibling"}],
        "references": [{"url": "https://example.org/x", "title": draw(text)}],
        "examples": {
            "match": [{"text": t, "source": "captured: " + s} for t, s in zip(draw(lines), draw(lines), strict=False)],
            "no_match": [{"text": t, "note": n} for t, n in zip(draw(lines), draw(lines), strict=False)],
        },
    }


def _shuffled(data: Any, rng: random.Random) -> Any:
    """The same data with every mapping's keys in a random order, as a hand-edited file might have them."""
    if isinstance(data, dict):
        keys = list(data)
        rng.shuffle(keys)
        return {k: _shuffled(data[k], rng) for k in keys}
    if isinstance(data, list):
        return [_shuffled(v, rng) for v in data]
    return data


def _dump(data: Any, flow: bool) -> str:
    y = YAML(typ="rt")
    y.default_flow_style = None if flow else False
    out = io.StringIO()
    y.dump(data, out)
    return out.getvalue()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries(), st.randoms(use_true_random=False), st.booleans())
def test_fmt_is_lossless_for_generated_entries(data: dict[str, Any], rng: random.Random, flow: bool) -> None:
    source = _dump(_shuffled(data, rng), flow)
    try:
        before = to_plain(load_text(source))
    except YamlProblem:
        before = None  # ruamel's dumper writes a few values it cannot read back (`?x` in flow style)
    # Nor is input that ruamel's dumper mangled (U+0085) what this test is about.
    assume(before == data)
    formatted = format_text(source)
    after = to_plain(load_text(formatted))
    assert after == before == data
    assert list(after) == list(data)  # the model's key order
    assert format_text(formatted) == formatted
    try:
        model = Entry.model_validate(before)
    except ValueError:
        return  # generated text can break length rules; the data comparison above is what matters
    assert Entry.model_validate(after) == model


def test_comments_stay_with_their_keys() -> None:
    source = (
        variant(("id: demo-device-mismatch\n", ""), ("title:", "# about the title\ntitle:"), ("severity: high\n", "severity: high  # end-of-line\n"))
        + "# the id, moved to the end by hand\nid: demo-device-mismatch\n"
    )
    out = format_text(source)
    assert out.splitlines()[:3] == [
        "# yaml-language-server: $schema=../schema/entry.schema.json",
        "# the id, moved to the end by hand",
        "id: demo-device-mismatch",
    ]
    assert "# about the title\ntitle:" in out
    assert "severity: high  # end-of-line\n" in out
    assert format_text(out) == out


# --- interrupted writes -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("fail", ["os.replace", "os.fsync"])
def test_interrupted_write_leaves_the_original(fail: str, make_kb, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    messy = variant(("id: demo-device-mismatch\n", "")) + "id: demo-device-mismatch\n"
    kb = make_kb({"demo-device-mismatch.yaml": messy}, with_good=False)
    path = kb / "demo-device-mismatch.yaml"

    def boom(*_args: Any, **_kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fail, boom)
    assert main(["fmt", str(path)]) == 1
    assert "left unchanged" in capsys.readouterr().err
    monkeypatch.undo()
    assert path.read_text(encoding="utf-8") == messy
    assert sorted(p.name for p in kb.iterdir()) == ["_tags.yaml", "demo-device-mismatch.yaml"]
    # And once the disk is back, the same command succeeds.
    assert main(["fmt", str(path)]) == 0
    assert path.read_text(encoding="utf-8").splitlines()[1] == "id: demo-device-mismatch"
    assert not any(p.name.endswith(".tmp") for p in kb.iterdir())
    assert os.access(path, os.R_OK)
