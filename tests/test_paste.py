"""Pasted-text normalizers (denpex_kb/paste.py) and the normalized tier of `match`.

Cases are the knowledge base's own example wordings (or obvious constructions) with a pasting artifact added.
"""

from __future__ import annotations

import textwrap

import pytest

from conftest import KB
from denpex_kb.bundle import default_index
from denpex_kb.compiler import index_from_kb_dir
from denpex_kb.matcher import EXACT, MIN_SCORE, NORMALIZED, match, match_line, match_line_ignoring_case
from denpex_kb.normalize import strip_prefixes
from denpex_kb.paste import BY_NAME, NORMALIZERS, SoftWrap, applied, normalize_line

IMA = "RuntimeError: CUDA error: an illegal memory access was encountered"
OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of "
    "79.15 GiB of which 3.25 MiB is free. Including non-PyTorch memory, this process has 79.14 GiB memory in use."
)
BF16 = "ValueError: Your setup doesn't support bf16/gpu. You need torch>=1.10, using Ampere GPU with cuda>=11.0"


@pytest.fixture(scope="module")
def index():
    try:
        return default_index()
    except ValueError:  # a stale packaged bundle while kb/ is being recompiled
        return index_from_kb_dir(KB, strict=False)


# (normalizer, pasted, what the program printed)
UNITS = [
    ("invisible-chars", "CUDA error:\u200b an illegal\ufeff memory access", "CUDA error: an illegal memory access"),
    ("quote-marker", "> RuntimeError: boom", "RuntimeError: boom"),
    ("quote-marker", "> > RuntimeError: boom", "RuntimeError: boom"),
    ("quote-marker", ">>> import torch", "import torch"),
    ("list-bullet", "- RuntimeError: boom", "RuntimeError: boom"),
    ("list-bullet", "  * RuntimeError: boom", "RuntimeError: boom"),
    ("list-bullet", "2) RuntimeError: boom", "RuntimeError: boom"),
    ("list-bullet", "\u2022 RuntimeError: boom", "RuntimeError: boom"),
    ("code-fence", "```RuntimeError: boom```", "RuntimeError: boom"),
    ("code-fence", "```python RuntimeError: boom", "RuntimeError: boom"),
    (
        "markdown-link",
        "NCCL WARN transport/[net_ib.cc:101](http://net_ib.cc:101/) NET/IB : Got async event",
        "NCCL WARN transport/net_ib.cc:101 NET/IB : Got async event",
    ),
    (
        "markdown-link",
        "[/usr/lib/python3/site-packages/torch/autograd/graph.py](https://localhost:8080/#) in _engine_run_backward",
        "/usr/lib/python3/site-packages/torch/autograd/graph.py in _engine_run_backward",
    ),
    ("wrapping-backticks", "`RuntimeError: boom`", "RuntimeError: boom"),
    ("wrapping-backticks", "``RuntimeError: boom``", "RuntimeError: boom"),
    ("double-backtick-code", "`` `num_stages` may help ``", "`num_stages` may help"),
    ("double-backtick-code", "``Assertion `srcIndex < srcSelectDimSize` failed.``", "Assertion `srcIndex < srcSelectDimSize` failed."),
    ("double-backtick-code", "`` ```fenced``` text ``", "```fenced``` text"),
    ("markdown-emphasis", "**RuntimeError: boom**", "RuntimeError: boom"),
    ("markdown-emphasis", "CUDA error: an **illegal memory access** was", "CUDA error: an illegal memory access was"),
    ("markdown-emphasis", "__RuntimeError: boom__", "RuntimeError: boom"),
    ("markdown-emphasis", "**RuntimeError: boom", "RuntimeError: boom"),
    ("fullwidth-ascii", "KeyError\uff1a\uff07RANK\uff07", "KeyError: 'RANK'"),
    ("fullwidth-ascii", "CUDA out of memory\uff0e Tried to allocate 20\uff0e00 MiB\uff08GPU 0\uff09",
     "CUDA out of memory. Tried to allocate 20.00 MiB(GPU 0)"),
    ("smart-quotes", "KeyError: \u2018RANK\u2019", "KeyError: 'RANK'"),
    ("smart-quotes", "could not select device driver \u201c\u201d with", 'could not select device driver "" with'),
    ("ellipsis", "CUDA error: an illegal memory access was\u2026", "CUDA error: an illegal memory access was"),
    ("ellipsis", "Loading\u2026 done", "Loading... done"),
    ("escaped-quotes", "Your setup doesn\\'t support bf16/gpu.", "Your setup doesn't support bf16/gpu."),
]


@pytest.mark.parametrize("name,pasted,printed", UNITS)
def test_each_normalizer_undoes_its_artifact(name, pasted, printed):
    assert BY_NAME[name].apply(pasted).strip() == printed
    assert name in applied(pasted)


# Text the normalizers must leave alone: the messages themselves use these characters.
UNTOUCHED = [
    "Assertion `srcIndex < srcSelectDimSize` failed.",
    "`FlatParameter` requires uniform dtype but got torch.float16 and torch.float32",
    "def forward(self, *args, **kwargs):",
    "self.__class__.__name__ is not __main__",
    "-> 2198 ctx.saved_tensors,",
    "ImportError: version `GLIBCXX_3.4.29' not found",
    "x = a - b",
    "Loading checkpoint shards...",
    "Set ``NCCL_DEBUG=INFO`` and ``NCCL_DEBUG_SUBSYS=ALL``",  # two code spans, not one around the line
    "`RANK` and `WORLD_SIZE` are unset",
    "\u8bad\u7ec3\u5931\u8d25\u3002RuntimeError: boom",  # CJK text and its own full stop (U+3002) stay
]


@pytest.mark.parametrize("text", UNTOUCHED)
def test_normalizers_leave_message_text_alone(text):
    assert normalize_line(text) == text


def test_every_normalizer_has_a_unit_case():
    assert {n.name for n in NORMALIZERS} == {name for name, _, _ in UNITS}


# Pastes the exact pass cannot read and the normalized pass can: (pasted, entry id).
NORMALIZED_CASES = [
    ("RuntimeError: CUDA error: an **illegal memory access** was encountered", "cuda-illegal-memory-access"),
    ("RuntimeError: CUDA error: an illegal memory\u200b access was encountered", "cuda-illegal-memory-access"),
    (BF16.replace("'", "\u2019"), "bf16-unsupported"),
    (BF16.replace("'", "\\'"), "bf16-unsupported"),
    ("KeyError: \u2018RANK\u2019", "distributed-env-missing"),
    ("KeyError\uff1a\uff07RANK\uff07", "distributed-env-missing"),
    ("RuntimeError\uff1aCUDA out of memory\uff0e Tried to allocate 20\uff0e00 MiB", "cuda-out-of-memory"),
    (
        "terminate called after throwing an instance of 'gloo::IoException' what(): [/pytorch/third_party/gloo/gloo/"
        "transport/tcp/[pair.cc:589](http://pair.cc:589/)] connect [127.0.0.1]:45695: Connection refused",
        "gloo-connection-failure",
    ),
    (OOM.lower(), "cuda-out-of-memory"),  # (IMA lowercased is now a signature of its own: the bare runtime string)
    (IMA.upper(), "cuda-illegal-memory-access"),
]


@pytest.mark.parametrize("pasted,entry", NORMALIZED_CASES)
def test_normalized_pass_names_the_failure(pasted, entry, index):
    found = match(pasted, index=index)
    assert found and found[0].id == entry
    assert found[0].tier == NORMALIZED
    assert found[0].to_dict()["tier"] == NORMALIZED
    assert 0 < found[0].score < MIN_SCORE


def test_exact_hits_are_tier_exact_and_unchanged(index):
    found = match(f"[rank3]: {IMA}", index=index)
    assert found[0].tier == EXACT and found[0].score >= MIN_SCORE and found[0].values["rank"] == 3


def test_normalized_scores_below_every_exact_score(index):
    exact = match(OOM, index=index)[0]
    normalized = match(OOM.lower(), index=index)[0]
    assert exact.id == normalized.id == "cuda-out-of-memory"
    assert normalized.score < MIN_SCORE <= exact.score
    assert match(OOM.replace("'", "\u2019").replace("of memory", "of **memory**"), index=index)[0].score < MIN_SCORE


def test_normalized_pass_runs_only_when_the_exact_pass_abstains(index):
    block = f"{BF16.replace(chr(39), chr(0x2019))}\n{IMA}"
    assert [(m.id, m.tier) for m in match(block, index=index)] == [("cuda-illegal-memory-access", EXACT)]


def test_case_is_the_last_resort_and_scores_lowest(index):
    bold = match(IMA.replace("illegal memory", "**illegal memory**"), index=index)[0]
    # (upper case: the lower-cased line is itself the bare runtime string, which a signature now knows)
    upper = match(IMA.upper(), index=index)[0]
    assert bold.tier == upper.tier == NORMALIZED
    assert upper.score < bold.score


def test_case_pass_finds_what_the_exact_pass_finds_whatever_the_case(index):
    # Every example line with its letter case swapped: the case-insensitive pass finds every signature the exact
    # pass finds on the original, those filed under a word and those only the word-less anchor set reaches.
    word_less = {id(sig) for sigs in index._always_sigs for sig in sigs}
    seen = reached_word_less = 0
    for entry in index.full_entries.values():
        for example in entry["examples"]["match"]:
            for raw in example["text"].splitlines():
                text = strip_prefixes(raw).text
                exact = {id(sig) for sig, _ in match_line(text, index)}
                if not exact:
                    continue
                seen += 1
                reached_word_less += bool(exact & word_less)
                assert exact <= {id(sig) for sig, _ in match_line_ignoring_case(text.swapcase(), index)}, raw
    assert seen > 1000 and reached_word_less > 50


def test_soft_wrap_chat_client(index):
    pasted = "\n".join(textwrap.wrap(IMA, 20))  # broken at spaces, the spaces dropped
    assert pasted.count("\n") >= 3
    assert match(pasted, index=index)[0].id == "cuda-illegal-memory-access"
    assert match(pasted, index=index)[0].tier == NORMALIZED


def test_soft_wrap_terminal_breaks_inside_words(index):
    pasted = "\n".join(IMA[i : i + 40] for i in range(0, len(IMA), 40))
    assert "illegal memory access" not in pasted.replace("\n", " ")
    found = match(pasted, index=index)
    # Two pieces leave no width to go by: the soft-wrap reading of the normalized pass finds it.
    assert found and found[0].id == "cuda-illegal-memory-access" and found[0].tier == NORMALIZED


# A real line (kb/triton-out-of-resources.yaml, pytorch/pytorch#158494) whose first 100 columns alone read as
# any torch.compile failure.
TRITON = ("[rank3]: torch._inductor.exc.InductorError: RuntimeError: No valid triton configs. OutOfMemoryError: "
          "out of resource: triton_tem_fused_0 Required: 107008 Hardware limit:101376 Reducing block sizes or "
          "`num_stages` may help.")


def test_terminal_wrap_rebuilt_names_the_specific_failure(index):
    pasted = "\n".join(TRITON[i : i + 100] for i in range(0, len(TRITON), 100))
    assert match(pasted.split("\n")[0], index=index)[0].id == "torch-compile-failure"
    found = match(pasted, index=index)
    # Rebuilt as printed: exact, with a wrap's lower score.
    assert found[0].id == "triton-out-of-resources" and found[0].tier == EXACT
    assert found[0].score < match(TRITON, index=index)[0].score


def test_terminal_wrap_needs_a_width_no_line_exceeds():
    piece = "x" * 60
    assert SoftWrap.terminal([piece, piece, "tail"], [False] * 3) == [(0, 3, piece * 2 + "tail")]
    # A longer line: the equal lengths are a coincidence, not a terminal's width.
    assert SoftWrap.terminal([piece, piece, "tail", "y" * 61], [False] * 4) == []
    # The next rank's copy of the same message opens with its prefix: a new line, not a continuation.
    ranks = [f"[rank{r}]: RuntimeError: the same message on every rank, padded to one width" for r in range(4)]
    assert len({len(r) for r in ranks}) == 1
    assert SoftWrap.terminal(ranks, [True] * 4) == []
    # An empty line ends a run.
    assert SoftWrap.terminal([piece, "", piece, "tail"], [False] * 4) == [(2, 2, piece + "tail")]


# A real line (kb/slurm-time-limit.yaml) cut once by a 100-column terminal, inside a word.
SLURM = ("slurmstepd: error: *** STEP 32233190.0 ON nid01934 CANCELLED AT 2020-07-03T02:59:56 DUE TO TIME LIMIT"
         " ***")


def test_single_terminal_wrap_rebuilt_at_the_exact_tier(index):
    pasted = SLURM[:100] + "\n" + SLURM[100:]
    assert pasted.split("\n")[0].endswith("TIME LIMI")
    found = match(pasted, index=index)
    assert found[0].id == "slurm-time-limit" and found[0].tier == EXACT
    assert found[0].score < match(SLURM, index=index)[0].score


def test_wrap_before_a_time_stamp_keeps_the_time_stamp(index):
    # Wrapped at a space right before the message's own time stamp: the continuation then reads as a line
    # opening with a time-stamp prefix, which the plain join would drop.
    head, tail = SLURM.split(" 2020-07-03")
    pasted = f"{head}\n2020-07-03{tail}"
    found = match(pasted, index=index)
    assert found[0].id == "slurm-time-limit" and found[0].tier == EXACT
    assert found[0].values.get("time") == "2020-07-03T02:59:56"


def test_single_terminal_wrap_needs_a_terminal_shape():
    head, tail = "x" * 80, "tail"
    assert SoftWrap.cut_pairs([head, tail], [False] * 2) == [(0, head + tail)]
    assert SoftWrap.cut_pairs(["x" * 79, tail], [False] * 2) == []  # narrower than any terminal
    assert SoftWrap.cut_pairs([head + " ", tail], [False] * 2) == []  # broken at a space: the spaced join reads it
    assert SoftWrap.cut_pairs([head, " " + tail], [False] * 2) == []
    assert SoftWrap.cut_pairs([head, "y" * 81], [False] * 2) == []  # longer than the line it would continue
    assert SoftWrap.cut_pairs([head, "[rank1]: tail"], [False, True]) == []  # a new printed line
    assert SoftWrap.cut_pairs([head, ""], [False] * 2) == []


def test_soft_wrap_width_and_joins():
    raw = ["a" * 50, "b" * 50, "c" * 10, "", "lone line"]
    assert SoftWrap.width(raw[:3]) == 50
    joins = SoftWrap.joins(raw, raw)
    texts = {t for _, _, t in joins}
    assert "a" * 50 + "b" * 50 in texts and "a" * 50 + " " + "b" * 50 in texts
    assert all(start < 3 for start, _, _ in joins)  # never across the blank line
    assert not any("lone" in t for t in texts)


def test_bytes_are_decoded(index):
    assert match(IMA.encode(), index=index)[0].id == "cuda-illegal-memory-access"
    assert match(bytearray(IMA.encode()), index=index)[0].id == "cuda-illegal-memory-access"
    assert match(b"\xff\xfe" + IMA.encode(), index=index)[0].id == "cuda-illegal-memory-access"


@pytest.mark.parametrize("bad", [None, 42, ["RuntimeError: x"], object()])
def test_non_text_is_a_clear_type_error(bad, index):
    with pytest.raises(TypeError, match=r"str \(or UTF-8 bytes\)"):
        match(bad, index=index)


def _benign_lines() -> list[str]:
    out: list[str] = []
    for log in sorted((KB.parent / "tests" / "corpus" / "benign").glob("*.log")):
        out += [line for line in log.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    return out


def test_benign_lines_stay_unmatched_with_artifacts_added(index):
    # Healthy lines pasted with every artifact: nothing may start matching (saying nothing beats being wrong).
    lines = _benign_lines()
    assert lines
    for line in lines:
        for pasted in (f"> **{line}**", f"- `{line}`", line.lower(), line.upper(), line.replace("'", "\u2019")):
            assert match(pasted, index=index) == [], pasted
    for i in range(0, len(lines), 40):
        assert match("\n".join(lines[i : i + 40]), index=index) == []
