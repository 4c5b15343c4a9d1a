"""An example's `source` leads to where the text was printed: owner/repo#N, the original page, or what was run."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import variant
from denpex_kb.codes import lookup
from denpex_kb.loader import load_kb
from denpex_kb.provenance import provenance_problem
from denpex_kb.validators import run_checks

ACCEPTED = [
    "pytorch/pytorch#112577",
    "NVIDIA/nccl#875",
    "https://github.com/NVIDIA/nccl/issues/875",
    "https://github.com/NVIDIA/nccl/blob/master/src/bootstrap.cc",
    "https://discuss.pytorch.org/t/nccl-error/12345",
    "https://huggingface.co/spaces/a/b/blob/35ae9633/bootstrap.sh",
    "https://archive.org/details/some-dataset",  # an item on archive.org is its own original, not the wayback
    "captured: torch 2.13.0 (CPU, gloo)",
    "captured: deepspeed 0.19.8, torch 2.13.0 (CPU, gloo)",
    "captured: bash 5 (Debian), python 3.11",
    "captured: megatron-core 0.16.1 (TransformerConfig(num_attention_heads=16), CPU)",
]

REJECTED = [
    # (value, words of the reason and fix)
    ("https://r.jina.ai/https://github.com/pytorch/pytorch/issues/1", ["through r.jina.ai", "(https://github.com/pytorch/pytorch/issues/1)"]),
    ("https://reader.example.net/fetch/https://github.com/a/b/issues/7", ["with another URL", "(https://github.com/a/b/issues/7)"]),
    ("https://web.archive.org/web/2024/https://discuss.pytorch.org/t/x/1", ["web.archive.org", "(https://discuss.pytorch.org/t/x/1)"]),
    ("https://web.archive.org/web/2024*/discuss.pytorch.org/t/x/1", ["through web.archive.org", "original page"]),
    ("https://archive.ph/AbCdE", ["through archive.ph"]),
    ("https://webcache.googleusercontent.com/search?q=cache:github.com/a/b", ["webcache.googleusercontent.com"]),
    ("https://github-com.translate.goog/pytorch/pytorch/issues/1?_x_tr_sl=auto", ["through translate.goog"]),
    ("https://ghproxy.com/https://github.com/a/b/issues/2", ["ghproxy.com", "(https://github.com/a/b/issues/2)"]),
    ("https://example.org/out?url=https%3A%2F%2Fgithub.com%2Fa%2Fb%2Fissues%2F3", ["(https://github.com/a/b/issues/3)"]),
    ("source: pytorch/pytorch/torch/optim/optimizer.py", ["source: source:", "https://github.com/pytorch/pytorch/blob/<commit>/torch/optim/optimizer.py"]),
    ("source: https://github.com/a/b/issues/4", ["source: source:", "write 'https://github.com/a/b/issues/4' alone"]),
    ("captured: torch", ["captured: <software> <version>"]),
    ("captured: on my laptop", ["no software and version"]),
    ("github.com/a/b/issues/5", ["owner/repo#N"]),
    ("https://localhost/log.txt", ["public host"]),
]


@pytest.mark.parametrize("value", ACCEPTED)
def test_the_three_forms_are_accepted(value):
    assert provenance_problem(value) is None


@pytest.mark.parametrize("value,words", REJECTED, ids=[r[0] for r in REJECTED])
def test_proxies_archives_and_doubled_keys_are_rejected_with_a_fix(value, words):
    why = provenance_problem(value)
    assert why is not None
    for word in words:
        assert word in why, why


EXAMPLE_SOURCE = '      source: "captured: torch 2.13.0 (CPU)"'


@pytest.mark.parametrize(
    "source,words",
    [
        ('"source: pytorch/pytorch/torch/nn/functional.py"', ["repeats its key", "blob/<commit>/torch/nn/functional.py"]),
        ("https://r.jina.ai/https://github.com/pytorch/pytorch/issues/9", ["original page (https://github.com/pytorch/pytorch/issues/9)"]),
    ],
)
def test_check_reports_the_source_at_its_place(make_kb, source, words):
    text = variant(("id: demo-device-mismatch", "id: bad-source"), (EXAMPLE_SOURCE, f"      source: {source}"))
    root = make_kb({"bad-source.yaml": text})
    found = [p for p in run_checks(load_kb(root)) if Path(p.path).name == "bad-source.yaml"]
    assert [p.code for p in found] == ["DKB110"], [p.render() for p in found]
    p = found[0]
    assert (p.line, p.col, p.check) == (28, 15, "provenance"), p.render()
    assert p.severity is lookup("DKB110").severity and p.fix == lookup("DKB110").fix
    assert "match example 1" in p.message
    for word in words:
        assert word in p.message, p.render()


def test_a_no_match_source_is_held_to_the_same_forms(make_kb):
    text = variant(("id: demo-device-mismatch", "id: bad-benign-source"), ("      note: a log line that only mentions devices", "      note: a log line that only mentions devices\n      source: \"source: pytorch/pytorch/torch/cuda/__init__.py\""))
    root = make_kb({"bad-benign-source.yaml": text})
    found = [p for p in run_checks(load_kb(root)) if p.code == "DKB110"]
    assert len(found) == 1 and "no_match example 1" in found[0].message, [p.render() for p in found]
    assert (found[0].line, found[0].col) == (32, 15)


def test_the_scaffolds_placeholder_is_left_to_the_placeholders_check(make_kb):
    text = variant(("id: demo-device-mismatch", "id: scaffolded"), (EXAMPLE_SOURCE, '      source: "captured: <fill in software and version>"'))
    root = make_kb({"scaffolded.yaml": text})
    codes = [p.code for p in run_checks(load_kb(root)) if Path(p.path).name == "scaffolded.yaml"]
    assert codes == ["DKB008"]
