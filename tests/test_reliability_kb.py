"""Reliability, round 2: hostile knowledge-base text, huge numbers, empty-matching signatures, relation cycles."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import GOOD_ENTRY, variant
from denpex_kb.loader import load_kb
from denpex_kb.validators import run_checks


def entry(name: str, old: str = "", new: str = "") -> str:
    text = variant(("id: demo-device-mismatch", f"id: {name}"))
    if old:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


def problems(root: Path, name: str) -> list:
    return [p for p in run_checks(load_kb(root)) if Path(p.path).name == name]


# 1. Invisible text: bidi controls everywhere, control characters in prose.

TITLE = "title: Tensors on different devices"
SUMMARY = "  summary: Move every input to the model's device before the call."
EXAMPLE = '  - text: "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"'
SIGNATURE = '    text: "Expected all tensors to be on the same device"'

REJECTED = [
    # (case, old, new, line, col, words)
    ("raw RLO in the title", TITLE, "title: Tensors on \u202edifferent devices", 3, 19, ["U+202E", "Trojan Source"]),
    ("escaped RLO in the title", TITLE, 'title: "Tensors on \\u202edifferent devices"', 3, 8, ["title", "U+202E", "escape"]),
    ("isolate in a symptom", "  - The first forward pass raises a RuntimeError.", '  - "The first \\u2066forward pass raises."', 14, 5, ["symptoms.0", "U+2066"]),
    ("raw bidi in a comment", "phase: forward", "phase: forward  # \u202d hidden", 5, 19, ["U+202D"]),
    ("bell in the fix summary", SUMMARY, '  summary: "Move every input \\a to the device."', 20, 12, ["fix.summary", "U+0007"]),
    ("OSC title in the summary", "summary: An operation received", 'summary: "\\e]0;pwned\\a long enough to be a summary" # An operation received', 4, 10, ["summary", "U+001B"]),
    ("C1 CSI in a cause", "  - A tensor was created", '  - "\\x9b2J A tensor" # was created', 16, 5, ["causes.0", "U+009B"]),
    ("NUL in a checklist item", "  - The message names two devices.", '  - "The message\\0 names two devices."', 18, 5, ["checklist.0", "U+0000"]),
    ("ANSI colour in prose", TITLE, 'title: "Tensors on \\e[31mdifferent devices"', 3, 8, ["U+001B", "prose"]),
    ("OSC 52 in an example", EXAMPLE, '  - text: "\\e]52;c;cm0K\\aRuntimeError: Expected all tensors to be on the same device"', 27, 13, ["examples.match.0.text", "ANSI CSI"]),
    ("escaped bidi in an example", EXAMPLE, '  - text: "RuntimeError: Expected all tensors to be on the same device \\u202e"', 27, 13, ["U+202E"]),
    ("escaped bidi in a signature", SIGNATURE, '    text: "Expected all tensors to be on the same device\\u2067"', 12, 11, ["signatures.0.text", "U+2067"]),
]


@pytest.mark.parametrize("case,old,new,line,col,words", REJECTED, ids=[c[0] for c in REJECTED])
def test_invisible_text_is_rejected_with_position(make_kb, case, old, new, line, col, words):
    root = make_kb({"hostile-text.yaml": entry("hostile-text", old, new)})
    found = [p for p in problems(root, "hostile-text.yaml") if p.code == "DKB108"]
    assert len(found) == 1, [p.render() for p in problems(root, "hostile-text.yaml")]
    p = found[0]
    assert (p.line, p.col) == (line, col), p.render()
    for word in words:
        assert word in p.message, p.render()
    assert "delete it" in p.message


ALLOWED = [
    ("ANSI colours in an example", EXAMPLE, '  - text: "\\e[1;31mRuntimeError\\e[0m: Expected all tensors to be on the same device\\e[2K"'),
    ("tab in an example", EXAMPLE, '  - text: "RuntimeError:\\tExpected all tensors to be on the same device"'),
    ("tab and colour in a signature", SIGNATURE, '    text: "Expected all tensors\\tto be on the same device"'),
    ("tab in prose", TITLE, 'title: "Tensors\\ton different devices"'),
    ("right-to-left text without controls", TITLE, "title: Tensors on different devices שלום"),
]


@pytest.mark.parametrize("case,old,new", ALLOWED, ids=[c[0] for c in ALLOWED])
def test_real_output_keeps_ansi_and_tabs(make_kb, case, old, new):
    root = make_kb({"real-output.yaml": entry("real-output", old, new)})
    assert [p.render() for p in problems(root, "real-output.yaml") if p.code == "DKB108"] == []


def test_real_kb_has_no_invisible_text():
    kb = load_kb(Path(__file__).resolve().parent.parent / "kb")
    assert [p.render() for p in run_checks(kb, ["invisible-text"])] == []


def test_fmt_keeps_bidi_escapes_as_written():
    from denpex_kb.formatting import format_text
    from denpex_kb.yamlio import load_text, to_plain

    text = entry("fmt-bidi", TITLE, 'title: "Tensors on \\u202edifferent \\u2066devices"').replace(
        "  - The first forward pass raises a RuntimeError.", "  - The first \u202dforward pass raises."
    )
    out = format_text(text)
    assert 'title: "Tensors on \\u202edifferent \\u2066devices"' in out
    assert "\\u202D" in out or "\\u202d" in out  # a raw override becomes visible as an escape
    for ch in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069":
        assert ch not in out
    assert to_plain(load_text(out)) == to_plain(load_text(text))
    assert format_text(out) == out


# 2. Integers too long for Python to convert.


@pytest.mark.parametrize("number", ["9" * 5000, "-" + "1_" * 3000 + "1"])
def test_huge_integer_gives_position_and_a_sentence(make_kb, number):
    root = make_kb({"huge-int.yaml": entry("huge-int", "severity: high", f"severity: {number}")})
    found = problems(root, "huge-int.yaml")
    assert len(found) == 1, [p.render() for p in found]
    p = found[0]
    assert (p.code, p.line, p.col) == ("DKB001", 7, 11), p.render()
    assert "digits" in p.message and "quote it" in p.message and "Exceeds the limit" not in p.message


def test_huge_integer_in_fmt_gives_position():
    from denpex_kb.formatting import format_text
    from denpex_kb.yamlio import YamlProblem

    with pytest.raises(YamlProblem) as info:
        format_text(entry("huge-int", "severity: high", "severity: " + "7" * 5000))
    assert (info.value.line, info.value.col) == (7, 11) and "digits" in str(info.value)


# 3. Signatures that match the empty string.

LITERAL_SIG = 'kind: literal\n    text: "Expected all tensors to be on the same device"'


@pytest.mark.parametrize(
    "signature",
    [
        'kind: regex\n    text: "(?:Foo exploded)?"\n    anchors: [Foo exploded]',
        'kind: regex\n    text: "(?:Expected all tensors to be on the same device)*"\n    anchors: [Expected all tensors]',
        'kind: regex\n    text: "Expected all tensors to be on the same device|"\n    anchors: [Expected all tensors]',
        'kind: regex\n    text: "(?:)"\n    anchors: [Expected all tensors]',
    ],
)
def test_signature_matching_the_empty_string_is_rejected(make_kb, signature):
    root = make_kb({"empty-sig.yaml": entry("empty-sig", LITERAL_SIG, signature)})
    found = [p for p in problems(root, "empty-sig.yaml") if p.code == "DKB104"]
    assert len(found) == 1, [p.render() for p in problems(root, "empty-sig.yaml")]
    assert (found[0].line, found[0].col) == (12, 11) and "empty string" in found[0].message, found[0].render()


def test_compile_signature_rejects_only_empty_matching_regexes():
    from denpex_kb.model import Signature, SignatureKind
    from denpex_kb.signatures import SignatureError, compile_signature

    with pytest.raises(SignatureError, match="empty string"):
        compile_signature(Signature(kind=SignatureKind.regex, text="(?:NCCL error)?", anchors=["NCCL error"]))
    assert compile_signature(Signature(kind=SignatureKind.regex, text="NCCL error(?: \\d+)?")).anchors == ("NCCL error",)


# 4. collateral-of cycles.


def linked(name: str, *links: tuple[str, str]) -> str:
    items = "".join(f"  - {{id: {target}, relation: {relation}}}\n" for target, relation in links)
    return entry(name) + "related:\n" + items


def test_collateral_cycles_are_rejected_at_each_link(make_kb):
    n = GOOD_ENTRY.count("\n") + 2  # the line of the first related item
    root = make_kb({
        "ring-aaa.yaml": linked("ring-aaa", ("ring-bbb", "collateral-of")),
        "ring-bbb.yaml": linked("ring-bbb", ("demo-device-mismatch", "sibling"), ("ring-ccc", "collateral-of")),
        "ring-ccc.yaml": linked("ring-ccc", ("ring-aaa", "collateral-of")),
        "pair-aaa.yaml": linked("pair-aaa", ("pair-bbb", "collateral-of")),
        "pair-bbb.yaml": linked("pair-bbb", ("pair-aaa", "collateral-of")),
        # fallout of the ring, and a chain: no cycle
        "tail-aaa.yaml": linked("tail-aaa", ("ring-aaa", "collateral-of"), ("tail-bbb", "collateral-of")),
        "tail-bbb.yaml": linked("tail-bbb", ("demo-device-mismatch", "collateral-of")),
        # sibling and often-caused-by links may go both ways
        "both-aaa.yaml": linked("both-aaa", ("both-bbb", "sibling"), ("both-bbb", "often-caused-by")),
        "both-bbb.yaml": linked("both-bbb", ("both-aaa", "sibling"), ("both-aaa", "often-caused-by")),
    })
    found = sorted((Path(p.path).name, p.line, p.col) for p in run_checks(load_kb(root)) if p.code == "DKB109")
    assert found == [
        ("pair-aaa.yaml", n, 5), ("pair-bbb.yaml", n, 5),
        ("ring-aaa.yaml", n, 5), ("ring-bbb.yaml", n + 1, 5), ("ring-ccc.yaml", n, 5),
    ]
    message = next(p.message for p in run_checks(load_kb(root)) if p.path.endswith("ring-aaa.yaml") and p.code == "DKB109")
    assert "ring-aaa -> ring-bbb -> ring-ccc -> ring-aaa" in message and "sibling" in message
    assert not [p for p in run_checks(load_kb(root)) if p.code != "DKB109"]

