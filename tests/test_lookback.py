"""Fingerprint events at `level: info` are healthy output: they stay out of the prefilter, and the lines just
before the following event are searched for them instead (lookback.py). The report is the one a line-by-line
read of every line gives, and healthy lines holding them are never candidates."""

from __future__ import annotations

import io
from pathlib import Path

from test_scan_fold import _parallel

from denpex_kb import default_index, passes, scan, scanner
from denpex_kb.examples import hot_anchors
from denpex_kb.lookback import LookbackPlan

# Real NCCL output: the bootstrap line of NVIDIA/nccl#834 (tests/corpus/benign/nccl.log), the WARN of
# kb/nccl-socket-connect-failure.yaml's examples.
BOOTSTRAP = "SH-IDC1-10-142-5-42:40544:40544 [0] NCCL INFO Bootstrap : Using ib0:10.142.205.42<0>"
CONNECT = ("ubuntu:39964:40075 [0] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to 10.0.0.2<45763> "
           "failed : Software caused connection abort")
STEP = "[rank0]: step 12 | loss 2.3100 | tokens/s 12000 | mem 61.2 GiB | lr 3.0e-4"


def _socket(report) -> list:
    return [f for f in report.findings if f.id == "nccl-socket-connect-failure"]


def test_info_event_anchors_are_not_searched_for_across_the_log():
    index = default_index()
    prefilter = scanner.prefilter_for(index)
    # The fingerprint's leading INFO event (NCCL's "Bootstrap : Using", "Bootstrap: Using" from 2.24.3) is looked
    # for only near a trigger, never across the whole log.
    assert "NCCL INFO Bootstrap" in index.deferred_anchors
    assert not any(a.startswith("NCCL INFO Bootstrap") for a in index.prefilter_anchors)
    assert not prefilter.search(BOOTSTRAP.encode())
    healthy = ("\n".join([BOOTSTRAP, STEP] * 500) + "\n").encode()
    hits = passes.stream_hits(io.BytesIO(healthy), prefilter, None, lookback=LookbackPlan(index))
    assert hits.lines == [] and hits.count == 1000


def test_the_sequence_is_still_seen_before_its_trigger(tmp_path: Path, monkeypatch):
    lines = [STEP] * 30 + [BOOTSTRAP] + [STEP] * 100 + [CONNECT] + [STEP] * 30
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    every_line = scan(list(lines))  # lines of an iterable are each checked for every anchor, deferred ones too
    read = scan(log)
    assert _socket(read) and _socket(read)[0].values.get("fingerprint") is True
    assert [f.to_dict() for f in read.findings] == [{**f.to_dict(), "file": str(log)} for f in every_line.findings]
    parallel = _parallel(monkeypatch, log)  # worker processes over memory-mapped windows
    assert [f.to_dict() for f in parallel.findings] == [f.to_dict() for f in read.findings]


def test_the_newer_bootstrap_spelling_starts_the_sequence_too(tmp_path: Path):
    # NCCL 2.24.3 dropped the space before the colon ("Bootstrap: Using").
    newer = BOOTSTRAP.replace("Bootstrap : Using", "Bootstrap: Using")
    log = tmp_path / "job.log"
    log.write_text("\n".join([STEP] * 30 + [newer] + [STEP] * 100 + [CONNECT] + [STEP] * 30) + "\n", encoding="utf-8")
    found = _socket(scan(log))
    assert found and found[0].values.get("fingerprint") is True


def test_a_leading_event_further_back_than_within_lines_does_not_count(tmp_path: Path):
    within = next(fp.within for fp in default_index().fingerprints if fp.entry.id == "nccl-socket-connect-failure")
    near = tmp_path / "near.log"
    far = tmp_path / "far.log"
    near.write_text("\n".join([BOOTSTRAP] + [STEP] * (within - 2) + [CONNECT]) + "\n", encoding="utf-8")
    far.write_text("\n".join([BOOTSTRAP] + [STEP] * (within + 5) + [CONNECT]) + "\n", encoding="utf-8")
    assert _socket(scan(near))[0].values.get("fingerprint") is True
    assert "fingerprint" not in _socket(scan(far))[0].values


def test_hot_anchors_are_reported_and_info_events_are_not():
    index = default_index()
    lines = [STEP] * 90 + [f"[rank1]: saving zero_pp_rank_{r}_mp_rank_00_optim_states.pt" for r in range(10)]
    assert hot_anchors(index, lines) == {"zero_pp_rank_": 10}
    assert hot_anchors(index, [BOOTSTRAP] * 50 + [STEP] * 50) == {}  # a `level: info` event's anchor
    assert hot_anchors(index, lines[:94]) == {}  # 4 lines: fewer than HOT_LINES


def test_info_events_must_lead_their_sequence(tmp_path: Path):
    from denpex_kb.loader import load_kb
    from denpex_kb.validators import run_checks

    src = Path(__file__).resolve().parent.parent / "kb"
    kb_dir = tmp_path / "kb"
    kb_dir.mkdir()
    (kb_dir / "_tags.yaml").write_text((src / "_tags.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    text = (src / "peer-access-unsupported.yaml").read_text(encoding="utf-8")
    info = '    - {level: info, kind: regex, text: "via P2P/(?:IPC|CUMEM)"}\n'
    warn = '    - {level: warn, kind: literal, text: "peer access is not supported between these two devices"}\n'
    assert info + warn in text
    for events, complaint in ((warn + info, "must come before"), (info + info.replace("IPC", "IPC/read"), "every event")):
        (kb_dir / "peer-access-unsupported.yaml").write_text(text.replace(info + warn, events), encoding="utf-8")
        kb = load_kb(kb_dir)
        found = [p for p in run_checks(kb) if p.code == "DKB104" and "level: info" in p.message]
        assert found and complaint in found[0].message, [p.render() for p in run_checks(kb)]


def test_only_the_trigger_event_itself_looks_back(tmp_path: Path):
    # Another NCCL WARN (kb/nccl-unhandled-system-error.yaml's example from a public thread) holds the trigger's
    # anchor but is not the sequence's next event: the bootstrap line before it is not read.
    other_warn = "spark01:2683:2826 [0] misc/ibvwrap.cc:268 NCCL WARN Call to ibv_create_cq failed"
    index = default_index()
    prefilter = scanner.prefilter_for(index)
    for last, looked_back in ((other_warn, False), (CONNECT, True)):
        data = ("\n".join([BOOTSTRAP, *[STEP] * 10, last]) + "\n").encode()
        hits = passes.stream_hits(io.BytesIO(data), prefilter, None, lookback=LookbackPlan(index))
        assert [number for number, _ in hits.lines] == ([1, 12] if looked_back else [12])
