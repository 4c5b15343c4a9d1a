"""Reliability, round 2: crafted lines, threads, terminals, endless and compressed inputs, KB text."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import variant
from denpex_kb import match, scan
from denpex_kb.normalize import safe_int, strip_prefixes

OOM = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB."
HUGE = "9" * 4_400  # Python refuses int() of more than 4,300 digits


def cli(*args: str, stdin: bytes | None = None, timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "denpex_kb", *args], capture_output=True, input=stdin, timeout=timeout)


# 1. Numbers of any length in prefixes and values.

HUGE_LINES = [
    f"[rank{HUGE}]: {OOM}",
    f"[default{HUGE}]: {OOM}",
    f"[1,{HUGE}]<stderr>: {OOM}",
    f"[{HUGE},1]<stderr>: {OOM}",
    f"(pid={HUGE}) {OOM}",
    f"(RayWorker pid={HUGE}, ip=10.0.0.1) {OOM}",
    f"{HUGE}: {OOM}",
    f"node7:{HUGE}:{HUGE} [{HUGE}] NCCL WARN Call to ibv_modify_qp failed",
    f"I0321 02:07:08.408271 {HUGE} ProcessGroupNCCL.cpp:607] {OOM}",
    f"torch.distributed.elastic.multiprocessing.errors.ChildFailedError: exitcode: -{HUGE}",
]


@pytest.mark.parametrize("line", HUGE_LINES, ids=range(len(HUGE_LINES)))
def test_huge_numbers_in_a_line_never_raise(line: str):
    strip_prefixes(line)
    match(line)
    report = scan([line])
    report.to_dict()


def test_huge_rank_is_not_taken_for_a_rank_but_the_failure_is_found():
    line = strip_prefixes(f"[rank{HUGE}]: {OOM}")
    assert line.rank is None
    assert [m.id for m in match(f"[rank{HUGE}]: {OOM}")][:1] == ["cuda-out-of-memory"]
    assert strip_prefixes(f"[rank123456]: {OOM}").rank == 123456  # ordinary ranks still read


def test_safe_int():
    assert safe_int("42") == 42 and safe_int("-9") == -9
    assert safe_int(HUGE) is None and safe_int("") is None and safe_int("１２") is None and safe_int(None) is None


@pytest.mark.parametrize("line", [f"[rank{HUGE}]: {OOM}", f"(pid={HUGE}) {OOM}", f"{HUGE}: {OOM}"], ids=["rank", "pid", "srun"])
def test_huge_numbers_from_the_cli_are_not_a_crash(tmp_path: Path, line: str):
    log = tmp_path / "huge.log"
    log.write_text(line + "\n")
    for args in (("scan", str(log)), ("match", line), ("scan", "--json", str(log))):
        result = cli(*args)
        assert b"Traceback" not in result.stderr and b"Exceeds the limit" not in result.stderr, result.stderr
        assert result.returncode in (0, 1)
        assert b"cuda-out-of-memory" in result.stdout


# 2. Thread safety.


def _job_lines(k: int) -> list[str]:
    watchdog = (
        f"[rank{k % 8}]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank {k % 8}] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, "
        "Timeout(ms)=600000) ran for 600060 milliseconds before timing out."
    )
    return ["step ok"] * (2_000 + 37 * k) + [f"[rank{k % 8}]: {OOM}", watchdog] + ["step ok"] * 1_000


@pytest.mark.parametrize("engine", ["auto", "re2"])
def test_scan_from_16_threads_equals_serial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str):
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setenv("DENPEX_KB_PREFILTER", engine)
    logs = []
    for k in range(16):
        log = tmp_path / f"job{k}.log"
        log.write_text("\n".join(_job_lines(k)) + "\n")
        logs.append(log)

    def one(k: int) -> list[dict]:
        out = []
        for _ in range(3):
            out.append(scan(logs[k]).to_dict())
            out.append(scan(_job_lines(k)).to_dict())
        return out

    serial = [one(k) for k in range(16)]
    with ThreadPoolExecutor(16) as pool:
        threaded = list(pool.map(one, range(16)))
    assert threaded == serial
    assert all(r["initiating"]["id"] == "cuda-out-of-memory" and r["lines"] for rs in serial for r in rs)


def test_newline_count_is_right_from_many_threads():
    # count_newlines reuses a buffer; it must be per thread, or threads overwrite each other's counts.
    from concurrent.futures import ThreadPoolExecutor

    from denpex_kb.scanner import count_newlines

    blocks = [(b"x" * (k + 1) + b"\n") * ((2 << 20) // (k + 2)) for k in range(16)]
    expected = [b.count(b"\n") for b in blocks]
    with ThreadPoolExecutor(16) as pool:
        for _ in range(3):
            assert list(pool.map(count_newlines, blocks)) == expected


# 3. Terminal injection: what a log, a file name or an entry says is shown, never obeyed.

RAW_CONTROLS = ("\x1b", "\x9b", "\x9d", "\x90", "\x07", "\u202e", "\u2066", "\x00", "\x08", "\r")
ESCAPES = {
    "osc52-clipboard": "\x1b]52;c;cm0gLXJmIH4K\x07",
    "osc52-st": "\x1b]52;c;cm0gLXJmIH4K\x1b\\",
    "osc0-title": "\x1b]0;pwned\x1b\\",
    "ris-reset": "\x1bc",
    "dcs": "\x1bP1$r0m\x1b\\",
    "unterminated-osc": "\x1b]0;still open ",
    "c1-csi": "\x9b2J\x9d0;t\x9c",
    "bidi": "\u202egnp.exe\u202c \u2066x\u2069",
    "backspace-bell": "\x08\x08\x08\x07",
}


def assert_no_raw_controls(out: str, allow_newlines: bool = True) -> None:
    for ch in RAW_CONTROLS:
        assert ch not in out, f"raw {ch!r} reached the terminal: {out!r}"


def test_visible_escapes_each_class():
    from denpex_kb.terminal import json_safe, visible

    for name, seq in ESCAPES.items():
        shown = visible(f"before {seq} after")
        assert_no_raw_controls(shown)
        assert "before" in shown and "after" in shown, name
    assert visible("a\nb") == "a\\x0ab" and visible("a\nb\x1b", keep_newlines=True) == "a\nb\\x1b"
    assert visible("tabs\tstay") == "tabs\tstay" and visible("ünïcödé, 日本") == "ünïcödé, 日本"
    import json

    value = {"t": "x\x9b\u202ey\x1b"}
    text = json_safe(json.dumps(value, ensure_ascii=False))
    assert json.loads(text) == value
    assert_no_raw_controls(text)


@pytest.mark.parametrize("name", list(ESCAPES))
def test_escape_sequences_in_a_log_line_are_shown_not_sent(tmp_path: Path, name: str):
    seq = ESCAPES[name]
    line = f"[rank1]: torch.cuda.OutOfMemoryError: CUDA out of memory. {seq}Tried to allocate 20.00 MiB.{seq} {seq}"
    unknown = f"Traceback (most recent call last):\n{seq}BadThingError: {seq}oops{seq}"
    log = tmp_path / "job.log"
    log.write_text(line + "\n" + unknown + "\n", encoding="utf-8")
    for args in (("scan", str(log)), ("scan", "--json", str(log)), ("match", line), ("match", "--json", line)):
        result = cli(*args)
        assert result.returncode in (0, 1), result.stderr
        out = result.stdout.decode("utf-8")
        assert_no_raw_controls(out)
    if name in ("osc52-clipboard", "osc52-st", "osc0-title", "ris-reset", "dcs"):  # whole sequences are removed
        assert b"cuda-out-of-memory" in cli("scan", str(log)).stdout


def test_file_names_with_escapes_and_newlines_are_shown_escaped(tmp_path: Path):
    log = tmp_path / "job\x1b]0;pwned\x07\nFAKE LINE\u202e.log"
    log.write_text(f"[rank1]: {OOM}\n", encoding="utf-8")
    result = cli("scan", str(log))
    out = result.stdout.decode("utf-8")
    assert result.returncode == 1
    assert_no_raw_controls(out)
    assert "\nFAKE LINE" not in out and "\\x0aFAKE LINE" in out
    missing = cli("scan", str(tmp_path / "gone\x1bc\n.log"))
    assert missing.returncode == 2
    assert_no_raw_controls(missing.stderr.decode("utf-8"))
    assert "\\x1bc" in missing.stderr.decode("utf-8")


def _hostile_bundle(make_kb, tmp_path: Path) -> Path:
    from denpex_kb.compiler import write_bundle
    from denpex_kb.loader import load_kb

    text = (
        variant(("title: Tensors on different devices", 'title: "Tensors \\e]0;pwned\\a on \\u202edifferent\\e[2J devices \\ec"'), ("summary: Move every input to the model's device before the call.", 'summary: "Move\\e]52;c;cm0K\\a every input \\x9b2J there."'), ("  - The first forward pass raises a RuntimeError.", '  - "The first \\eP1$r\\e\\\\ pass raises."'))
    )
    root = make_kb({"demo-device-mismatch.yaml": text}, with_good=False)
    kb = load_kb(root)
    assert "\x1b" in kb.entries["demo-device-mismatch"].title  # the hostile text really reached the entry
    bundle = tmp_path / "bundle"
    write_bundle(kb, bundle)
    return bundle


def test_kb_fields_are_shown_escaped_by_explain_list_match_scan(make_kb, tmp_path: Path):
    import os

    bundle = _hostile_bundle(make_kb, tmp_path)
    env = {**os.environ, "DENPEX_KB_BUNDLE": str(bundle)}
    line = "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
    log = tmp_path / "job.log"
    log.write_text(line + "\n")
    for args in (("explain", "demo-device-mismatch"), ("list",), ("list", "--json"), ("match", line), ("scan", str(log))):
        result = subprocess.run([sys.executable, "-m", "denpex_kb", *args], capture_output=True, env=env, timeout=120)
        assert result.returncode in (0, 1), (args, result.stderr)
        out = result.stdout.decode("utf-8")
        assert "pwned" in out or "demo-device-mismatch" in out, (args, out)
        assert_no_raw_controls(out)


# 4. Endless inputs.


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_character_devices_are_refused(device: str):
    result = cli("scan", device, timeout=30)
    assert result.returncode == 2 and b"is a device" in result.stderr and b"Traceback" not in result.stderr
    with open(device, "rb") as fh:
        result = subprocess.run([sys.executable, "-m", "denpex_kb", "scan", "-"], stdin=fh, capture_output=True, timeout=30)
    assert result.returncode == 2 and b"stdin is a device" in result.stderr


def test_dev_null_on_stdin_is_an_empty_log():
    result = subprocess.run([sys.executable, "-m", "denpex_kb", "scan", "-"], stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    assert result.returncode == 0 and b"No failure found" in result.stdout


def test_fifo_without_writer_gives_up(tmp_path: Path):
    import os
    import time

    fifo = tmp_path / "nobody.fifo"
    os.mkfifo(fifo)
    start = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "denpex_kb", "scan", str(fifo)], capture_output=True, timeout=60,
                            env={**os.environ, "DENPEX_KB_FIFO_WAIT": "1"})
    assert result.returncode == 2 and b"named pipe that nothing wrote to" in result.stderr
    assert time.monotonic() - start < 30


def test_fifo_with_a_late_writer_is_read(tmp_path: Path):
    import os
    import threading
    import time

    fifo = tmp_path / "late.fifo"
    os.mkfifo(fifo)

    def writer() -> None:
        time.sleep(1.5)
        with open(fifo, "wb") as fh:
            fh.write(f"[rank5]: {OOM}\n".encode())

    t = threading.Thread(target=writer)
    t.start()
    report = scan(fifo)
    t.join(10)
    assert report.initiating is not None and report.initiating.rank == 5


def test_what_a_scan_keeps_is_bounded(monkeypatch: pytest.MonkeyPatch):
    import denpex_kb.scanner as scanner

    monkeypatch.setattr(scanner, "MAX_FINDINGS", 50)
    monkeypatch.setattr(scanner, "MAX_OPEN", 20)
    monkeypatch.setattr(scanner, "MAX_RANKS", 10)
    collector = scanner._Collector(scanner.default_index())

    def lines():  # an endless stream of distinct failures, cut here at 3,000 lines
        for k in range(1_000):
            yield f"[rank{k}]: Traceback (most recent call last):"
            yield f"[rank{k}]: Bad{k}ThingError: oops {k}"
            yield f"[rank{k}]: {OOM}"

    for n, raw in enumerate(lines(), 1):
        collector.feed(raw, n)
        assert len(collector.tracebacks) <= 20 and len(collector.groups) <= 50
    report = collector.report(3_000, ["<lines>"])
    assert len(report.findings) == 50 and collector.dropped > 0
    assert any("not kept" in e for e in report.errors)
    oom = next(f for f in report.findings if f.id == "cuda-out-of-memory")
    assert oom.count == 1_000 and len(oom.ranks) == 10


# 5. Compressed input, on stdin or as a path, told by its first bytes.

LOG = f"step 1 ok\n[rank3]: {OOM}\nstep 2 ok\n".encode()


def _compressors() -> dict[str, bytes]:
    import bz2
    import gzip
    import lzma

    return {"gz": gzip.compress(LOG), "bz2": bz2.compress(LOG), "xz": lzma.compress(LOG)}


@pytest.mark.parametrize("kind", ["gz", "bz2", "xz"])
def test_compressed_stdin_and_paths_are_decompressed(tmp_path: Path, kind: str):
    data = _compressors()[kind]
    path = tmp_path / "job.log.bin"  # the name says nothing: the first bytes decide
    path.write_bytes(data)
    for args, stdin in ((("scan", "-"), data), (("scan", "--json", str(path)), None)):
        result = cli(*args, stdin=stdin)
        assert result.returncode == 1, (kind, args, result.stdout, result.stderr)
        assert (b"cuda-out-of-memory" in result.stdout and b"rank 3" in result.stdout) or b'"rank": 3' in result.stdout
    import io

    assert scan(io.BytesIO(data)).initiating.id == "cuda-out-of-memory"


@pytest.mark.parametrize("kind", ["bz2", "xz"])
def test_truncated_bz2_and_xz_warn(tmp_path: Path, kind: str):
    import bz2
    import lzma

    big = LOG + b"".join(b"ok line %d\n" % i for i in range(200_000))
    data = bz2.compress(big) if kind == "bz2" else lzma.compress(big)
    path = tmp_path / "cut.log"
    path.write_bytes(data[: len(data) // 2])
    report = scan(path)
    assert report.initiating is not None and report.errors and "truncated or corrupt" in report.errors[0]


def test_zstd_without_a_decoder_is_refused_not_reported_clean(tmp_path: Path):
    try:
        import zstandard  # noqa: F401

        pytest.skip("a zstd decoder is installed")
    except ImportError:
        pass
    zst = b"\x28\xb5\x2f\xfd" + b"\x00" * 32
    path = tmp_path / "job.log.zst"
    path.write_bytes(zst)
    for args, stdin in ((("scan", str(path)), None), (("scan", "-"), zst)):
        result = cli(*args, stdin=stdin)
        assert result.returncode == 2 and b"zstd" in result.stderr and b"No failure found" not in result.stdout


@pytest.mark.parametrize("magic,word", [(b"PK\x03\x04", b"zip"), (b"\x04\x22\x4d\x18", b"lz4"), (b"7z\xbc\xaf\x27\x1c", b"7z")])
def test_archives_are_refused(tmp_path: Path, magic: bytes, word: bytes):
    path = tmp_path / "job.bin"
    path.write_bytes(magic + b"\x00" * 64)
    result = cli("scan", str(path))
    assert result.returncode == 2 and word in result.stderr


def test_text_that_starts_like_a_magic_is_still_text():
    import io

    report = scan(io.BytesIO(b"BZh is how this log starts\n[rank3]: " + OOM.encode() + b"\n"))
    assert report.initiating is not None and report.initiating.id == "cuda-out-of-memory"
    assert scan(io.BytesIO(b"PK")).lines == 1  # shorter than any magic


# 6. Long physical lines: a `\r` progress bar longer than MAX_LINE, with the failure glued after it.


def _bar(size: int) -> str:
    out, i, total = [], 0, 0
    while total < size:
        out.append(f" {i % 100:3d}%|{'#' * (i % 10):<10}| {i}/100000 [00:01<00:09, 9.1it/s]\r")
        total += len(out[-1])
        i += 1
    return "".join(out)


@pytest.mark.parametrize("size", [20_000, 100_000, 9 << 20], ids=["20KB", "100KB", "9MB-over-a-chunk"])
def test_failure_after_a_long_carriage_return_bar_is_found(tmp_path: Path, size: int):
    from denpex_kb.normalize import MAX_LINE

    line = _bar(size) + f"[rank6]: {OOM}"
    assert len(line) > MAX_LINE
    log = tmp_path / "bar.log"
    log.write_text("step ok\n" + line + "\nstep ok\n")
    report = scan(log)
    assert report.initiating is not None and report.initiating.id == "cuda-out-of-memory", size
    assert report.initiating.rank == 6 and report.initiating.line_number == 2 and report.lines == 3
    if size < 1 << 20:
        assert scan([line]).initiating.id == "cuda-out-of-memory"
        assert strip_prefixes(line).text == OOM and strip_prefixes(line).rank == 6
        assert [m.id for m in match(line)][:1] == ["cuda-out-of-memory"]


def test_failure_before_a_long_bar_on_the_same_line_is_still_found(tmp_path: Path):
    log = tmp_path / "bar.log"
    log.write_text(f"[rank2]: {OOM}\r" + _bar(40_000) + "\n")
    report = scan(log)
    assert report.initiating is not None and report.initiating.rank == 2


# 7. Determinism across hash seeds.


def _lines_with_several_signatures_of_one_entry() -> list[str]:
    """Example lines that several signatures of one entry match, each giving other values: where the order in
    which hits are merged shows."""
    from denpex_kb import default_index
    from denpex_kb.matcher import match_line

    idx = default_index()
    out = []
    for entry in idx.full_entries.values():
        for ex in (entry.get("examples") or {}).get("match") or []:
            for raw in ex["text"].splitlines():
                keys: dict[str, set] = {}
                for sig, m in match_line(strip_prefixes(raw).text, idx):
                    keys.setdefault(sig.entry.id, set()).add(tuple(k for k, v in m.groupdict().items() if v is not None))
                if any(len(v) > 1 for v in keys.values()):
                    out.append(raw)
    return out


def test_scan_json_is_byte_identical_across_hash_seeds(tmp_path: Path):
    import os

    lines = _lines_with_several_signatures_of_one_entry()
    assert len(lines) >= 5
    rendezvous = "[W socket.cpp:558] [c10d] The client socket has failed to connect to [localhost]:29500 (errno: 99 - Cannot assign requested address)."
    log = tmp_path / "job.log"
    log.write_text("\n".join([rendezvous, *lines, f"[rank3]: {OOM}"]) + "\n")
    outputs = set()
    for seed in ("0", "1", "2", "3", "7"):
        result = subprocess.run([sys.executable, "-m", "denpex_kb", "scan", "--json", str(log)], capture_output=True,
                                timeout=120, env={**os.environ, "PYTHONHASHSEED": seed})
        assert result.returncode == 1, result.stderr
        outputs.add(result.stdout)
    assert len(outputs) == 1


# 8. `match` says when it did not read everything.


def test_match_warns_when_it_keeps_only_the_first_lines():
    block = ("step ok\n" * 2_500 + OOM + "\n").encode()
    result = cli("match", "-", stdin=block)
    assert result.returncode == 0
    assert b"only the first 2,000 lines" in result.stderr and b"denpex-kb scan" in result.stderr
    short = cli("match", "-", stdin=("step ok\n" * 10 + OOM + "\n").encode())
    assert short.stderr == b"" and b"cuda-out-of-memory" in short.stdout


def test_match_warns_when_it_keeps_only_the_first_mebibytes():
    result = cli("match", "-", stdin=OOM.encode() + b" " + b"x" * (5 << 20))
    assert b"only the first 4 MiB" in result.stderr and b"denpex-kb scan" in result.stderr
    assert b"cuda-out-of-memory" in result.stdout


def test_scan_accepts_bytes_and_text_streams_and_refuses_the_rest(tmp_path):
    import gzip as _gzip
    import io as _io

    import denpex_kb as _dkb

    line = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB."
    path = tmp_path / "job.log"
    path.write_text(line + "\n", encoding="utf-8")
    with path.open(encoding="utf-8") as text_file:
        sources = [line.encode(), bytearray(_gzip.compress(line.encode())), _io.StringIO(line + "\n"),
                   _io.BytesIO(line.encode()), text_file]
        for src in sources:
            report = _dkb.scan(src)
            assert report.initiating is not None and report.initiating.id == "cuda-out-of-memory", type(src)
    for bad in (None, 42, object()):
        with pytest.raises(TypeError, match="scan\\(\\) takes a path"):
            _dkb.scan(bad)
