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
