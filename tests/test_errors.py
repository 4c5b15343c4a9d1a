"""Every error the package raises derives from DenpexError and says where, with its old name, type and message."""

from __future__ import annotations

import pytest

from conftest import variant
from denpex_kb.bundle import BUNDLE_FORMAT, KbIndex
from denpex_kb.compiler import index_from_kb_dir
from denpex_kb.errors import BundleError, DenpexError, KnowledgeBaseError, LocatedError, Location
from denpex_kb.formatting import FormatError, format_text
from denpex_kb.model import Signature, SignatureKind
from denpex_kb.scaffold import ScaffoldError, propose
from denpex_kb.signatures import SignatureError, compile_signature
from denpex_kb.templates import TemplateError, compile_template
from denpex_kb.yamlio import DuplicateKey, YamlProblem, load_text


@pytest.mark.parametrize(
    "cls,was_value_error",
    [(YamlProblem, False), (DuplicateKey, False), (FormatError, False), (TemplateError, True), (SignatureError, True),
     (BundleError, True), (KnowledgeBaseError, True), (ScaffoldError, True)],
)
def test_one_base_and_the_old_types_kept(cls, was_value_error):
    assert issubclass(cls, DenpexError)
    # `except ValueError` written before the base existed keeps catching what it caught
    assert issubclass(cls, ValueError) is was_value_error


def test_yaml_and_format_errors_share_the_located_base():
    assert issubclass(YamlProblem, LocatedError) and issubclass(FormatError, LocatedError)
    err = FormatError("an entry must be a YAML mapping of fields")
    assert (err.line, err.col, str(err)) == (1, 1, "an entry must be a YAML mapping of fields")
    located = YamlProblem("YAML syntax: x", 3, 7, "kb/a.yaml")
    assert located.location == Location("kb/a.yaml", 3, 7)
    assert located.located() == "kb/a.yaml:3:7: YAML syntax: x" and str(located) == "YAML syntax: x"
    assert DenpexError("no place").located() == "no place"


def test_yaml_problem_position_and_message_unchanged():
    with pytest.raises(DuplicateKey) as info:
        load_text("id: a\nid: b\n")
    assert (info.value.line, info.value.col, info.value.code) == (2, 1, "DKB002")
    assert str(info.value).startswith("YAML syntax: duplicate key") and "merge the two" in str(info.value)
    with pytest.raises(YamlProblem) as info2:
        load_text("a: &x 1\nb: *x\n")
    assert info2.value.code == "DKB001" and (info2.value.line, info2.value.col) == (2, 4)
    with pytest.raises(FormatError, match="mapping"):
        format_text("- a list\n")


def test_template_and_signature_errors_keep_their_offset():
    with pytest.raises(TemplateError) as info:
        compile_template("oops {size")
    assert info.value.offset == 5 and info.value.location == Location(None, 1, 6)
    assert "unbalanced" in str(info.value)
    with pytest.raises(SignatureError) as sig:
        compile_signature(Signature(kind=SignatureKind.template, text="oops {size and more text"))
    assert sig.value.offset == 5 and "unbalanced" in str(sig.value)


def test_bundle_of_another_format_raises_a_bundle_error():
    with pytest.raises(BundleError, match="recompile the knowledge base"):
        KbIndex({"format": BUNDLE_FORMAT + 1})


def test_strict_compile_of_a_broken_kb_names_the_first_problem(make_kb):
    root = make_kb({"bad-phase.yaml": variant(("id: demo-device-mismatch", "id: bad-phase"), ("phase: forward", "phase: fwd"))})
    with pytest.raises(KnowledgeBaseError) as info:
        index_from_kb_dir(root)
    err = info.value
    assert str(err).startswith("the knowledge base has problems; run `denpex-kb check`:\n")
    assert err.problems and err.problems[0].code == "DKB003"
    assert err.location is not None and err.location.path is not None and err.location.path.endswith("bad-phase.yaml")
    assert (err.location.line, err.location.col) == (5, 8)


def test_scaffold_refuses_an_empty_paste_with_a_scaffold_error():
    with pytest.raises(ScaffoldError, match="empty once prefixes are removed"):
        propose("[rank0]: \n")
