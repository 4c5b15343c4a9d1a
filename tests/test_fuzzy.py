"""The fuzzy and evidence tiers of `match` (denpex_kb/fuzzy.py): what they answer, what they refuse, and that
they never outrank a signature.

Mechanism tests use a small generated knowledge base, so each rule is seen in isolation; the calibration
properties (benign corpus, every no_match example) run against the real knowledge base.
"""

from __future__ import annotations

import json
import pickle
import textwrap
from pathlib import Path

import pytest

from conftest import KB, entry_yaml
from denpex_kb.bundle import default_index
from denpex_kb.compiler import compile_fuzzy, index_from_kb_dir
from denpex_kb.fuzzy import THRESHOLD, FuzzyIndex, content_words, skeleton
from denpex_kb.loader import load_kb
from denpex_kb.matcher import EVIDENCE, EXACT, FUZZY, MIN_SCORE, match

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def index():
    try:
        return default_index()
    except ValueError:
        return index_from_kb_dir(KB, strict=False)


def _entry(tmp: Path, entry_id: str, signatures: list[str], examples: list[str], title: str = "Generated failure"):
    (tmp / f"{entry_id}.yaml").write_text(entry_yaml(entry_id, signatures, examples, title=title))


@pytest.fixture()
def tiny(tmp_path: Path):
    """Two entries with distinct wordings, one wording both print, and an exception class one of them claims."""
    (tmp_path / "_tags.yaml").write_text((KB / "_tags.yaml").read_text())
    _entry(tmp_path, "widget-quota-exhausted",
           ["WidgetQuotaError: widget quota exhausted while reserving spindles for the flux capacitor"],
           ["WidgetQuotaError: widget quota exhausted while reserving spindles for the flux capacitor on node 3",
            "[rank1]: WidgetQuotaError: widget quota exhausted while reserving spindles for the flux capacitor",
            "shared tail: see the operator manual for the sprocket daemon"])
    _entry(tmp_path, "sprocket-daemon-lost",
           ["sprocket daemon lost its lease on the gearbox coordinator after 30 heartbeats"],
           ["sprocket daemon lost its lease on the gearbox coordinator after 30 heartbeats",
            "shared tail: see the operator manual for the sprocket daemon"])
    return index_from_kb_dir(tmp_path, strict=False)


def test_skeleton_masks_values_and_keeps_failure_values():
    assert skeleton("[rank3]: Tried to allocate 2.00 GiB on GPU 7") == "tried to allocate {size} on gpu {num}"
    assert skeleton("{'loss': nan, 'epoch': 0.5}") == "{'loss': nan, 'epoch': {float}}"
    assert "ue" in content_words(skeleton("EDAC MC0: 1 UE memory read error"))
    assert "of" not in content_words("out of memory")


def test_a_reworded_line_is_answered_by_the_fuzzy_tier(tiny):
    line = "WidgetQuotaError: widget quota was exhausted while reserving the spindles for a flux capacitor"
    assert not match(line, index=tiny, fuzzy=False)
    found = match(line, index=tiny)
    assert [m.id for m in found] == ["widget-quota-exhausted"]
    assert found[0].tier == FUZZY
    assert 1 <= found[0].score < MIN_SCORE // 2
    assert "widget quota exhausted" in found[0].signature  # the known wording it is close to


def test_a_cut_off_line_is_answered_when_it_starts_where_the_wording_starts(tiny):
    found = match("sprocket daemon lost its lease on the gearbox coordin", index=tiny)
    assert [m.id for m in found] == ["sprocket-daemon-lost"] and found[0].tier == FUZZY
    # The end of a wording alone is not evidence: messages share their tails.
    assert match("its lease on the gearbox coordinator after 30 heartbeats", index=tiny) == []


def test_a_line_without_the_wordings_exception_class_starts_where_its_message_starts(tmp_path: Path):
    """Pastes often leave out the class ("CUDA error: invalid device ordinal" for "RuntimeError: CUDA error: ..."):
    the cut-off rule counts from where the message starts, so a long class name does not push the line out."""
    (tmp_path / "_tags.yaml").write_text((KB / "_tags.yaml").read_text())
    _entry(tmp_path, "gearbox-lease-expired",
           ["GearboxCoordinatorUnavailableError: lease expired on gearbox while the spindle turned"],
           ["GearboxCoordinatorUnavailableError: lease expired on gearbox 7 while the spindle turned"])
    index = index_from_kb_dir(tmp_path, strict=False)
    found = match("lease expired on gearbox while the spindle turned", index=index)
    assert [m.id for m in found] == ["gearbox-lease-expired"] and found[0].tier == FUZZY
    # The message's own tail is still no evidence.
    assert match("gearbox while the spindle turned", index=index) == []


def test_a_wording_two_entries_print_names_neither(tiny):
    assert match("shared tail: see the operators manual for the sprocket daemon", index=tiny) == []


def test_a_word_that_changes_the_meaning_is_not_close(tiny):
    line = "sprocket daemon renewed its lease on the gearbox coordinator after 30 heartbeats"
    assert match(line, index=tiny) == []


def test_fuzzy_never_runs_when_a_signature_matched(tiny):
    block = textwrap.dedent("""\
        sprocket daemon lost its lease on the gearbox coordinator after 30 heartbeats
        WidgetQuotaError: widget quota was exhausted while reserving the spindles for a flux capacitor
    """)
    found = match(block, index=tiny)
    assert [(m.id, m.tier) for m in found] == [("sprocket-daemon-lost", EXACT)]


def test_an_exception_class_alone_is_evidence_for_the_entry_that_claims_it(tiny):
    found = match("[rank0]: WidgetQuotaError", index=tiny)
    assert [(m.id, m.tier) for m in found] == [("widget-quota-exhausted", EVIDENCE)]
    assert found[0].score < match("WidgetQuotaError: widget quota was exhausted while reserving the spindles "
                                  "for a flux capacitor", index=tiny)[0].score
    assert match("RuntimeError", index=tiny) == []  # Python's own classes are evidence for nothing


def test_the_fuzzy_threshold_is_the_calibrated_one(tiny):
    fz = tiny.fuzzy
    sk = skeleton("WidgetQuotaError: widget quota was exhausted while reserving the spindles for a flux capacitor")
    _k, score = fz.answer(sk, threshold=0.0)
    assert score >= THRESHOLD
    assert fz.answer(sk, threshold=min(100.0, score + 0.5)) is None


def test_the_index_pickles_with_its_fuzzy_tier(tiny):
    again = pickle.loads(pickle.dumps(tiny))
    line = "WidgetQuotaError: widget quota was exhausted while reserving the spindles for a flux capacitor"
    assert [m.to_dict() for m in match(line, index=again)] == [m.to_dict() for m in match(line, index=tiny)]


def test_a_bundle_without_fuzzy_data_still_matches(tiny):
    tiny.__dict__["fuzzy"] = None
    assert match("WidgetQuotaError: widget quota was exhausted while reserving", index=tiny) == []
    assert match("sprocket daemon lost its lease on the gearbox coordinator after 30 heartbeats", index=tiny)


def test_fuzzy_index_refuses_another_format():
    with pytest.raises(ValueError, match="format"):
        FuzzyIndex({"format": 0, "known": [], "evidence": {}})


# The real knowledge base: the properties the threshold was calibrated for.

def _benign_lines() -> list[str]:
    lines = []
    for log in sorted((ROOT / "tests" / "corpus" / "benign").glob("*.log")):
        lines += log.read_text(encoding="utf-8", errors="replace").splitlines()
    return lines


def test_benign_corpus_gets_no_fuzzy_or_evidence_answer(index):
    answered = [(line, m.id) for line in _benign_lines()
                for m in match(line, index=index) if m.tier in (FUZZY, EVIDENCE)]
    assert answered == []


def test_no_match_examples_never_fuzzy_match_their_own_entry(index):
    kb = load_kb(KB)
    wrong = []
    for entry_id, entry in sorted(kb.entries.items()):
        for example in entry.examples.no_match:
            for m in match(example.text, index=index):
                if m.id == entry_id and m.tier in (FUZZY, EVIDENCE):
                    wrong.append((entry_id, example.text[:80]))
    assert wrong == []


def test_the_shipped_fuzzy_data_equals_a_fresh_compile():
    shipped = json.loads((ROOT / "denpex_kb" / "data" / "fuzzy.json").read_text(encoding="utf-8"))
    index = json.loads((ROOT / "denpex_kb" / "data" / "index.json").read_text(encoding="utf-8"))
    fresh = compile_fuzzy(load_kb(KB)) | {"digest": index["digest"]}
    assert shipped == fresh, "the bundled fuzzy.json is stale: run `denpex-kb compile` and commit denpex_kb/data/"


def test_cli_says_a_fuzzy_answer_is_fuzzy(tiny, tmp_path, capsys):
    from denpex_kb.cli import main

    kb_dir = Path(tiny.source)
    line = "WidgetQuotaError: widget quota was exhausted while reserving the spindles for a flux capacitor"
    assert main(["match", "--kb", str(kb_dir), line]) == 0
    out = capsys.readouterr().out
    assert "fuzzy" in out and "close to:" in out
    assert main(["match", "--kb", str(kb_dir), "--json", line]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["matches"][0]["tier"] == "fuzzy"


def test_denpex_kb_test_reports_examples_only_the_fuzzy_tier_catches(tmp_path, capsys):
    from denpex_kb.cli import main

    (tmp_path / "_tags.yaml").write_text((KB / "_tags.yaml").read_text())
    reworded = "WidgetQuotaError: widget quota was exhausted while reserving the spindles for a flux capacitor"
    _entry(tmp_path, "widget-quota-exhausted",
           ["WidgetQuotaError: widget quota exhausted while reserving spindles for the flux capacitor"],
           ["WidgetQuotaError: widget quota exhausted while reserving spindles for the flux capacitor on node 3",
            reworded])
    assert main(["test", "--kb", str(tmp_path), "--format", "json", "widget-quota-exhausted"]) == 1
    result = json.loads(capsys.readouterr().out)["entries"][0]
    assert result["false_negatives"] == 1 and result["fuzzy_only"] == 1
    assert result["failures"][0]["fuzzy"] == "widget-quota-exhausted"
    assert main(["test", "--kb", str(tmp_path), "widget-quota-exhausted"]) == 1
    out = capsys.readouterr().out
    assert "1 caught only by the fuzzy tier" in out and "a signature is missing" in out
