"""The `response` block: what a scheduler should do once this failure started it all."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from conftest import GOOD_ENTRY, variant
from denpex_kb.loader import load_kb
from denpex_kb.model import Blame, Response, Retry
from denpex_kb.validators import run_checks


def test_depends_needs_a_note():
    with pytest.raises(ValidationError, match="depends needs a `note`"):
        Response(retry=Retry.depends, blame=Blame.node)
    assert Response(retry="depends", blame="node", note="Rerun elsewhere only when dmesg shows an Xid.").note


def test_note_is_one_line():
    with pytest.raises(ValidationError, match="one line"):
        Response(retry="yes", blame="fabric", note="first sentence here.\nsecond line")


def test_unknown_values_are_rejected():
    with pytest.raises(ValidationError):
        Response(retry="maybe", blame="code")
    with pytest.raises(ValidationError):
        Response(retry="no", blame="gremlins")


def _codes(kb_root) -> list[str]:
    return [p.code for p in run_checks(load_kb(kb_root))]


def test_stable_entry_without_response_fails_check(make_kb):
    without = variant(('response:\n  retry: "no"\n  blame: code\n', ""))
    assert without != GOOD_ENTRY
    root = make_kb({"demo-device-mismatch.yaml": without})
    assert "DKB106" in _codes(root)


def test_draft_entry_may_lack_response(make_kb):
    draft = variant(('response:\n  retry: "no"\n  blame: code\n', ""), ("status: stable", "status: draft"))
    root = make_kb({"demo-device-mismatch.yaml": draft})
    assert "DKB106" not in _codes(root)


def test_complete_entry_passes(make_kb):
    assert "DKB106" not in _codes(make_kb())


def test_every_shipped_stable_entry_has_a_response():
    from conftest import KB

    kb = load_kb(KB)
    missing = [e.id for e in kb.entries.values() if e.status == "stable" and e.response is None]
    assert missing == []
