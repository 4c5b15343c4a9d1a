"""Workers fold repeated findings where they find them (passes.Folder): a log in which every line is a known
failure no longer sends every line to the parent, and the report is the one a sequential read gives."""

from __future__ import annotations

from pathlib import Path

from test_scan import FAILED, HEALTHY, OOM, SIGTERM, WATCHDOG, job_log

from denpex_kb import scan


def _all_failures() -> list[str]:
    # every line a finding: out-of-memory errors of 64 ranks on 8 hosts, repeated, then the launcher's fallout;
    # and watchdog timeouts, which a fingerprint follows, so they are never folded
    lines = [f"node{r % 8}: [rank{r}]: {OOM}" for _ in range(30) for r in range(64)]
    lines += ["[rank3]: Traceback (most recent call last):", f"[rank3]: {OOM}"]
    lines += [f"[rank{r}]:{WATCHDOG}" for r in range(8)] + [SIGTERM, FAILED] * 50
    return lines


def _parallel(monkeypatch, log: Path):
    from denpex_kb import passes, reading

    monkeypatch.setattr(passes, "PARALLEL_MIN", 1)
    monkeypatch.setattr(reading, "CHUNK", 16 << 10)

    def no_fallback(*args, **kwargs):
        raise AssertionError("the parallel path fell back to the sequential one")

    monkeypatch.setattr(passes, "scan_stream", no_fallback)
    return scan(log)


def test_folded_repeats_give_the_sequential_report(tmp_path: Path, monkeypatch):
    for name, lines in (("all-failures", _all_failures()), ("job", job_log() * 40), ("healthy", list(HEALTHY))):
        log = tmp_path / f"{name}.log"
        log.write_text("\n".join(lines) + "\n", encoding="utf-8")
        sequential = scan(log)
        parallel = _parallel(monkeypatch, log)
        monkeypatch.undo()
        assert parallel.lines == sequential.lines == len(lines), name
        assert [f.to_dict() for f in parallel.findings] == [f.to_dict() for f in sequential.findings], name
        assert parallel.to_dict() == sequential.to_dict(), name


def test_a_worker_sends_each_group_once(tmp_path: Path):
    from denpex_kb import passes, scanner
    from denpex_kb.bundle import default_index

    log = tmp_path / "all.log"
    lines = _all_failures()
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    index = default_index()
    prefilter = scanner.prefilter_for(index)
    passes._FORKED["t"], passes._FORKED_INDEX["t"] = prefilter, index
    try:
        hits = passes.range_worker(str(log), 0, log.stat().st_size, "t")
    finally:
        passes._FORKED.pop("t"), passes._FORKED_INDEX.pop("t")
    assert hits.count == len(lines)
    # kept: the first line of each group, the traceback header, and the 8 watchdog lines a fingerprint follows
    assert len(hits.lines) < 20
    assert sum(extra[0] for extra in hits.folded.values()) + len(hits.lines) == len(lines)
    oom = next(extra for group, extra in hits.folded.items() if group[0] == "cuda-out-of-memory")
    assert set(oom[1]) == set(range(64)) and set(oom[2]) == {f"node{h}" for h in range(8)}


def test_a_worker_folds_a_window_at_a_time(tmp_path: Path, monkeypatch):
    """The worker never holds every candidate line of its range: each window's lines are folded before the next
    window is read (a 1 GB log of failures would otherwise sit in one worker's memory)."""
    import mmap

    from denpex_kb import passes, reading, scanner
    from denpex_kb.bundle import default_index

    monkeypatch.setattr(reading, "CHUNK", 16 << 10)
    log = tmp_path / "all.log"
    lines = _all_failures()
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    index = default_index()
    folded: dict = {}
    fold = passes.Folder(index, None, folded)
    windows: list[int] = []

    def recording(window):
        windows.append(len(window))
        return fold(window)

    with log.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        hits = passes.mapped_hits(mm, 0, log.stat().st_size, scanner.prefilter_for(index), None, recording)
    assert len(windows) > 10 and max(windows) < len(lines) / 5  # many windows, none holding most of the lines
    assert len(hits.lines) < 20 and sum(extra[0] for extra in folded.values()) + len(hits.lines) == len(lines)


def test_many_small_tasks_and_a_failure_midway_give_the_sequential_report(tmp_path: Path, monkeypatch):
    """Results are taken a task at a time; a worker that dies after some tasks were taken leaves the rest of the
    file to be read plainly, from where those tasks end, with the right line numbers."""
    from denpex_kb import passes

    log = tmp_path / "job.log"
    lines = job_log() * 60
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    sequential = scan(log)
    monkeypatch.setattr(passes, "TASK_BYTES", 8 << 10)
    many = _parallel(monkeypatch, log)
    assert many.to_dict() == sequential.to_dict()
    monkeypatch.undo()

    real = passes.range_worker
    half = log.stat().st_size // 2

    def dies_in_the_second_half(path, start, end, key="prefilter"):
        if start > half:
            raise OSError("worker lost")
        return real(path, start, end, key)

    monkeypatch.setattr(passes, "PARALLEL_MIN", 1)
    monkeypatch.setattr(passes, "TASK_BYTES", 8 << 10)
    monkeypatch.setattr(passes, "range_worker", dies_in_the_second_half)
    broken = scan(log)
    assert broken.lines == len(lines) and broken.to_dict() == sequential.to_dict()
