"""Prefix stripping and masking on the shapes real logs have."""

from __future__ import annotations

from pathlib import Path

import pytest

from denpex_kb.masks import mask_line
from denpex_kb.normalize import exception_type, strip_prefixes
from denpex_kb.templates import TemplateError, compile_template

CASES = [
    ("[rank3]: torch.OutOfMemoryError: CUDA out of memory.", "torch.OutOfMemoryError: CUDA out of memory.", 3),
    ("[default1]:RuntimeError: boom", "RuntimeError: boom", 1),
    ("3: RuntimeError: boom", "RuntimeError: boom", 3),
    ("[1,5]<stderr>:RuntimeError: boom", "RuntimeError: boom", 5),
    ("0: [rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught", "[Rank 0] Watchdog caught", 0),
    ("E0321 02:07:08.408271 1234 ProcessGroupNCCL.cpp:915] NCCL watchdog", "NCCL watchdog", None),
    ("[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught", "[Rank 1] Watchdog caught", None),
    ("node7:12345:12399 [3] NCCL WARN Call to connect returned Connection refused", "NCCL WARN Call to connect returned Connection refused", None),
    (  # https://github.com/NVIDIA/nccl/issues/1515 (newer NCCL adds the source file before the level)
        "ubuntu:39964:40075 [0] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to 10.0.0.2<45763> failed : Software caused connection abort",
        "NCCL WARN socketStartConnect: Connect to 10.0.0.2<45763> failed : Software caused connection abort",
        None,
    ),
    ("[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=1", "NVRM: Xid (PCI:0000:3b:00): 79, pid=1", None),
    ("Mar 21 02:07:08 gpu-node12 kernel: [ 1234.5] NVRM: Xid", "NVRM: Xid", None),
    ("\x1b[31mRuntimeError\x1b[0m: boom", "RuntimeError: boom", None),
    ("Epoch 1:  45%|####5     | 450/1000 [01:23<01:42,  5.36it/s]RuntimeError: CUDA out of memory.", "RuntimeError: CUDA out of memory.", None),
    ("(RayTrainWorker pid=909608, ip=10.0.0.1) [rank1]: ValueError: x", "ValueError: x", 1),
    ("2024-05-01 10:00:00,123 RuntimeError: x", "RuntimeError: x", None),
    (  # https://github.com/kaito-project/kaito/issues/976
        "ERROR 04-01 23:46:56 [engine.py:160] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 546.00 MiB.",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 546.00 MiB.",
        None,
    ),
    ("gpu-node3: Traceback (most recent call last):", "Traceback (most recent call last):", None),
    ("trainer-1  | Killed", "Killed", None),
    ("myproj-worker-1   | 2024-05-01T12:00:00.123456789Z [rank1]: RuntimeError: x", "RuntimeError: x", 1),
    ("a | b", "a | b", None),
    ("RuntimeError: x  with   spaces", "RuntimeError: x with spaces", None),
    (" 12%|#2        | 12/100 [00:01<00:08]\r 13%|#3        | 13/100 [00:01<00:08]\rValueError: late", "ValueError: late", None),
]


@pytest.mark.parametrize("raw,text,rank", CASES)
def test_prefixes_are_stripped(raw, text, rank):
    line = strip_prefixes(raw)
    assert line.text == text
    assert line.rank == rank


def test_exception_names_are_not_taken_for_hosts():
    assert strip_prefixes("RuntimeError: CUDA error").text == "RuntimeError: CUDA error"
    assert strip_prefixes("ValueError: bad").text == "ValueError: bad"


@pytest.mark.parametrize(
    "raw,text,host,kernel",
    [
        # `kubectl logs --timestamps` / `docker logs -t`: an RFC 3339 stamp before the container's own text.
        ("2024-05-01T12:00:00.123456789Z CUDA Exception: Warp Misaligned Address",
         "CUDA Exception: Warp Misaligned Address", None, False),
        ("2024-05-01T12:00:00.123456789Z ncclCommInitRank failed: internal error",
         "ncclCommInitRank failed: internal error", None, False),
        # rsyslog's high-precision format: the kernel, or a program with its pid.
        ("2019-08-19T04:18:38.274699-04:00 linux-dgwd kernel: Out of memory: Kill process 1234 (python)",
         "Out of memory: Kill process 1234 (python)", "linux-dgwd", True),
        ("2026-02-08T00:40:07.136808+00:00 largeweb2 systemd[1]: session-3.scope: Failed with result 'oom-kill'.",
         "session-3.scope: Failed with result 'oom-kill'.", "largeweb2", True),
        # The classic stamp keeps any program name.
        ("Mar 21 02:07:08 gpu-node12 slurmstepd: error: Detected 1 oom-kill event(s)",
         "error: Detected 1 oom-kill event(s)", "gpu-node12", True),
    ],
)
def test_a_time_stamp_before_a_message_is_not_a_syslog_header(raw, text, host, kernel):
    from denpex_kb.normalize import KERNEL_PREFIXES

    line = strip_prefixes(raw)
    assert (line.text, line.host) == (text, host)
    assert bool(KERNEL_PREFIXES.intersection(line.prefixes)) is kernel


def test_a_kernel_device_tag_is_not_taken_for_a_host():
    # The SXid line of the NVSwitch driver as dmesg prints it (quoted in the gpud project's SXid notes): after the
    # kernel's time stamp, `nvidia-nvswitch1: ` names a device, not the host that logged the line.
    raw = "[6781753.400584] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up"
    line = strip_prefixes(raw)
    assert line.host is None and line.text.startswith("nvidia-nvswitch1: SXid")
    pdsh = strip_prefixes("gpu-node12: [6781753.400584] NVRM: Xid (PCI:0000:91:00): 79, GPU has fallen off the bus.")
    assert pdsh.host == "gpu-node12" and pdsh.text.startswith("NVRM: Xid")


@pytest.mark.parametrize(
    "text,expected",
    [
        ("torch.OutOfMemoryError: CUDA out of memory", "torch.OutOfMemoryError"),
        ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError:", "torch.distributed.elastic.multiprocessing.errors.ChildFailedError"),
        ("KeyboardInterrupt", "KeyboardInterrupt"),
        ("UserWarning: something", None),
        ("Error: lowercase start is fine but not a class? no", None),
    ],
)
def test_exception_type(text, expected):
    assert exception_type(text) == expected


def test_masks_cover_the_variable_parts():
    line = "rank 3 at 10.0.0.12:29500 tried 2.00 GiB at 0x7f3a in /data/run/ckpt.pt after 1.5e-3"
    assert mask_line(line) == "rank {num} at {ip} tried {size} at {hex} in {path} after {float}"
    assert mask_line("NVRM: Xid (PCI:0000:3b:00.0): 79") == "NVRM: Xid (PCI:{pci}): {num}"
    assert mask_line("fp16 and bf16 on cuda:0") == "fp16 and bf16 on cuda:{num}"


def test_template_compiles_placeholders_and_braces():
    t = compile_template("Tried to allocate {size:requested} on {{device}}")
    assert t.groups == ("requested",)
    assert "{device}" in t.literals[-1]
    with pytest.raises(TemplateError) as exc:
        compile_template("oops {size")
    assert exc.value.offset == 5
    with pytest.raises(TemplateError):
        compile_template("unknown {nothing}")


def _one_prefix_at_a_time(raw: str) -> tuple:
    """What strip_prefixes does, read as PREFIXES says: at each step the first prefix kind whose pattern matches."""
    import denpex_kb.normalize as n

    text = n.last_segment(raw) if "\r" in raw else raw[: n.MAX_LINE]
    if "\x1b" in text:
        text = n._ANSI.sub("", text)
    bar = n._TQDM.match(text) if "%|" in text else None
    text = (text[bar.end():] if bar else text).replace("\x00", "").rstrip("\n")
    names: list[str] = []
    found: dict[str, str] = {}
    for _ in range(8):
        stripped = text.lstrip(" ") if not names else text
        hit = next(((p.name, m) for p in n.PREFIXES if (m := p.pattern.match(stripped)) and m.end()), None)
        if hit is None:
            break
        name, m = hit
        if name == "pdsh-host" and names and names[-1] in ("kernel-time", "dmesg-human", "syslog", "syslog-iso"):
            break  # after a kernel log's prefix the same shape is a device tag, kept in the text
        names.append(name)
        for key, value in m.groupdict().items():
            if value and key in ("rank", "host", "pid", "stamp"):
                found.setdefault(key, value)
        text = stripped[m.end():]
    return " ".join(text.split()), names, found.get("host"), found.get("stamp")


def test_one_alternation_strips_what_the_prefix_kinds_say_in_order():
    from ruamel.yaml import YAML

    root = Path(__file__).resolve().parent.parent
    lines = [line for path in sorted((root / "tests" / "corpus" / "benign").glob("*.log"))
             for line in path.read_text(encoding="utf-8").splitlines()]
    for path in sorted((root / "kb").glob("*.yaml")):
        data = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
        examples = (data.get("examples") or {}) if isinstance(data, dict) else {}
        lines += [line for ex in examples.get("match", []) + examples.get("no_match", []) for line in ex["text"].splitlines()]
    assert len(lines) > 2000
    for raw in lines:
        line = strip_prefixes(raw)
        assert (line.text, line.prefixes, line.host, line.stamp) == _one_prefix_at_a_time(raw), raw
