"""Every entry's examples through the real matcher, and healthy output through the real scanner."""

from __future__ import annotations

import pytest

from conftest import KB
from denpex_kb import default_index, match, scan
from denpex_kb.examples import benign_problems, find_benign_dir
from denpex_kb.loader import load_kb

_KB = load_kb(KB)
ENTRIES = sorted(_KB.entries.values(), key=lambda e: e.id)


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.id)
def test_match_examples_rank_their_entry_first(entry):
    for ex in entry.examples.match:
        ranked = match(ex.text)
        assert ranked, f"{entry.id}: nothing matched {ex.text[:120]!r}"
        assert ranked[0].id == entry.id, f"{entry.id}: {ranked[0].id} ranked first for {ex.text[:120]!r}"
        assert 0 <= ranked[0].score <= 100


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.examples.no_match], ids=lambda e: e.id)
def test_no_match_examples_do_not_match_their_entry(entry):
    for ex in entry.examples.no_match:
        assert entry.id not in {r.id for r in match(ex.text, top=50)}, f"{entry.id} matched {ex.text[:120]!r}"


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.status != "draft"], ids=lambda e: e.id)
def test_entries_meet_the_content_floor(entry):
    # The standard every published entry meets: variety of real examples, benign look-alikes, references.
    # A draft (shown as such on the hub) is an entry whose real-world wordings are still being collected.
    assert len(entry.examples.match) >= 4, f"{entry.id}: fewer than 4 match examples"
    assert len(entry.examples.no_match) >= 2, f"{entry.id}: fewer than 2 no_match examples"
    assert entry.references, f"{entry.id}: no references"
    assert any(c.purpose.value == "verify" for c in entry.commands), f"{entry.id}: no command that verifies the fix"


def test_benign_corpus_gives_no_findings():
    benign = find_benign_dir(KB)
    assert benign is not None and list(benign.glob("*.log")), "tests/corpus/benign/ has no logs"
    problems = benign_problems(_KB, default_index(), benign)
    assert problems == [], "\n".join(p.render() for p in problems)


def test_benign_logs_scan_clean():
    benign = find_benign_dir(KB)
    for log in sorted(benign.glob("*.log")):
        report = scan(log)
        assert report.initiating is None, f"{log.name}: {report.initiating}"
