"""The prefilter engines agree on which line segments hold a literal, also on buffers dense with matches."""

from __future__ import annotations

import pytest

from denpex_kb import default_index, prefilter, scanner


def _dense() -> bytes:
    literals = default_index().prefilter_anchors
    every = " ".join(literals)
    lines = [f"[rank{r}]: {every}" for r in range(40)]
    lines += ["healthy step 12 loss 2.31", f"bar 10%|#  \r{literals[3]} after a progress bar\r50%|#####"]
    lines += [f"[rank{r}]: {every}" for r in range(40, 60)]
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("most", [1, 8, prefilter.MAX_MATCHES])
def test_a_dense_buffer_gives_every_matching_segment_once(monkeypatch, most: int):
    index = default_index()
    literals = sorted(set(index.prefilter_anchors) | set(scanner.GENERIC_MARKERS) | set(scanner.VERSION_MARKERS))
    try:
        engine = prefilter.HyperscanPrefilter(literals)
    except ImportError:
        pytest.skip("no Hyperscan wheel on this platform")
    monkeypatch.setattr(prefilter, "MAX_MATCHES", most)
    data = _dense()
    expected = prefilter.Re2Prefilter(literals).spans(data)
    assert len(expected) == 61  # 60 dense lines and the one segment after the progress bar
    assert engine.spans(data) == expected
    # as the memory-mapped reader passes a window: a memoryview
    assert prefilter.line_spans(data, engine.positions(memoryview(data))) == expected


def test_a_registered_engine_is_used_by_name_and_first_by_auto(monkeypatch):
    """`register_engine` is the extension point for another multi-literal engine: by name, and ahead of the
    built-in ones for `auto` when registered `first`; an unknown name says which engines exist."""
    monkeypatch.setattr(prefilter, "ENGINES", dict(prefilter.ENGINES))
    built: list[list[str]] = []

    class Counting(prefilter.Re2Prefilter):
        name = "counting"

        def __init__(self, literals: list[str]) -> None:
            built.append(literals)
            super().__init__(literals)

    prefilter.register_engine("counting", Counting)
    assert list(prefilter.ENGINES)[-1] == "counting"
    engine = prefilter.make_prefilter(["CUDA out of memory"], engine="counting")
    assert engine.name == "counting" and engine.spans(b"ok\nCUDA out of memory\n") == [(3, 21)]
    assert type(prefilter.make_prefilter(["x y z"])) is not Counting  # auto still tries the built-in ones first
    prefilter.register_engine("counting", Counting, first=True)
    assert next(iter(prefilter.ENGINES)) == "counting" and list(prefilter.ENGINES).count("counting") == 1
    assert type(prefilter.make_prefilter(["x y z"])) is Counting and len(built) == 2
    with pytest.raises(ValueError, match="known: counting, hyperscan, re2"):
        prefilter.make_prefilter(["x"], engine="nope")
