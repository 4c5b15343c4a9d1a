"""The command line: exit codes, output formats, stdin and gzip input."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import variant
from denpex_kb.cli import main

OOM = (
    "[rank0]: torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity "
    "of 4.00 GiB of which 2.35 GiB is free. Of the allocated memory 825.15 MiB is allocated by PyTorch, and 24.85 MiB "
    "is reserved by PyTorch but unallocated."
)


def run_cli(*args: str, stdin: bytes | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "denpex_kb", *args], input=stdin.decode() if stdin is not None else None,
        capture_output=True, text=True, cwd=cwd, timeout=120,
    )


def test_match_names_the_failure_and_its_fix(capsys):
    assert main(["match", OOM]) == 0
    out = capsys.readouterr().out
    assert out.startswith("cuda-out-of-memory")
    assert "fix:" in out and "entries/cuda-out-of-memory/" in out


def test_match_json_shape(capsys):
    assert main(["match", "--json", OOM]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["query"] == OOM
    first = data["matches"][0]
    assert first["id"] == "cuda-out-of-memory"
    assert first["values"]["requested"] == "20.00 MiB" and first["values"]["rank"] == 0
    for key in ("title", "phase", "score", "signature", "fix", "url"):
        assert first[key] not in (None, "")


def test_match_benign_line_gives_nothing(capsys):
    assert main(["match", "--json", "Epoch 3: 100%|##########| 500/500 [01:02<00:00, 8.01it/s, loss=0.231]"]) == 0
    assert json.loads(capsys.readouterr().out)["matches"] == []


def test_match_reads_stdin():
    result = run_cli("match", "--json", "-", stdin=OOM.encode())
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["matches"][0]["id"] == "cuda-out-of-memory"


def test_match_usage_errors():
    assert run_cli("match", "--top", "0", "x").returncode == 2
    assert run_cli("match", "--no-such-flag").returncode == 2


def test_scan_exit_codes_and_gzip(tmp_path: Path):
    healthy = tmp_path / "healthy.log"
    healthy.write_text("step 1 loss 2.0\nstep 2 loss 1.9\n", encoding="utf-8")
    failing = tmp_path / "failing.log.gz"
    with gzip.open(failing, "wt", encoding="utf-8") as fh:
        fh.write("step 1 loss 2.0\n" + OOM + "\n")
    assert run_cli("scan", str(healthy)).returncode == 0
    result = run_cli("scan", "--json", str(failing))
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["initiating"]["id"] == "cuda-out-of-memory"
    assert report["initiating"]["line_number"] == 2 and report["initiating"]["rank"] == 0
    missing = run_cli("scan", str(tmp_path / "nope.log"))
    assert missing.returncode == 2 and "no such file" in missing.stderr and "Traceback" not in missing.stderr
    assert run_cli("scan", str(tmp_path)).returncode == 2


def test_scan_reads_stdin():
    result = run_cli("scan", "-", stdin=("hello\n" + OOM + "\n").encode())
    assert result.returncode == 1
    assert "cuda-out-of-memory" in result.stdout and "rank 0" in result.stdout


def test_list_json_from_another_directory(tmp_path: Path):
    result = run_cli("list", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert len(rows) >= 60
    assert {"id", "title", "phase", "tags", "status"} <= set(rows[0])


def test_check_exit_codes(make_kb, tmp_path: Path):
    clean = make_kb()
    assert main(["check", "--kb", str(clean), "--no-examples"]) == 0
    (clean / "broken-entry.yaml").write_text(variant(("id: demo-device-mismatch", "id: broken-entry"), ("phase: forward", "phase: sideways")))
    assert main(["check", "--kb", str(clean), "--no-examples"]) == 1
    assert main(["check", "--kb", str(tmp_path / "absent")]) == 2
    with pytest.raises(SystemExit) as exc:
        main(["check", "--format", "xml"])
    assert exc.value.code == 2


def test_check_formats(make_kb, capsys):
    root = make_kb({"bad-one.yaml": variant(("id: demo-device-mismatch", "id: bad-one"), ("severity: high", "severity: mild"))})
    assert main(["check", "--kb", str(root), "--format", "json", "--no-examples"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["errors"] == 1 and data["problems"][0]["line"] == 7
    assert main(["check", "--kb", str(root), "--format", "junit", "--no-examples"]) == 1
    xml = capsys.readouterr().out
    assert xml.startswith("<testsuite") and "DKB003" in xml


def test_schema_command_prints_the_schema(capsys):
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert "Entry" in schema["$defs"]


def test_no_command_is_a_usage_error():
    assert main([]) == 2


def test_package_docstring_example_holds():
    import doctest

    import denpex_kb

    assert doctest.testmod(denpex_kb).failed == 0


def test_rank_ranges_are_compact():
    from denpex_kb.commands.scan_cmd import ranges

    assert ranges([0, 1, 2, 4, 5, 6, 7]) == "0-2,4-7"
    assert ranges([5, 1, 2, 9, 10, 2]) == "1-2,5,9-10"
    assert ranges([3]) == "3"


def test_explain_suggests_the_entry_a_mistyped_id_meant(capsys):
    from denpex_kb.cli import main

    assert main(["explain", "cuda-out-of-memry"]) == 2
    assert "did you mean cuda-out-of-memory?" in capsys.readouterr().err


def test_match_starts_without_modules_it_does_not_use():
    """What a fresh `match` process imports is most of its time: these are left to the commands that use them
    (dataclasses brings inspect, ast and tokenize; shutil brings bz2 and lzma; packs brings pathlib and hashlib)."""
    heavy = ("dataclasses", "inspect", "shutil", "pathlib", "hashlib", "denpex_kb.packs", "denpex_kb.scanner")
    code = ("import sys\nfrom denpex_kb.cli import main\ntry:\n    main(['match', 'RuntimeError: CUDA error: an "
            "illegal memory access was encountered'])\nexcept SystemExit:\n    pass\n"
            f"print(sorted(m for m in {heavy!r} if m in sys.modules), file=sys.stderr)")
    env = {k: v for k, v in os.environ.items() if k != "DENPEX_KB_BUNDLE"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert "cuda-illegal-memory-access" in done.stdout, done.stdout
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr


def test_match_and_scan_commands_start_without_the_entry_model(tmp_path):
    """The commands answer from the shipped bundle: the loader, the compiler, the pydantic model are for `--kb`."""
    log = tmp_path / "job.log"
    log.write_text("RuntimeError: CUDA error: an illegal memory access was encountered\n", encoding="utf-8")
    heavy = ("pydantic", "denpex_kb.model", "denpex_kb.loader", "denpex_kb.compiler")
    for args in (["match", "RuntimeError: CUDA error: an illegal memory access was encountered"], ["scan", str(log)]):
        code = (f"import sys\nfrom denpex_kb.cli import main\ntry:\n    main({args!r})\nexcept SystemExit:\n    pass\n"
                f"print(sorted(m for m in {heavy!r} if m in sys.modules), file=sys.stderr)")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert "cuda-illegal-memory-access" in done.stdout, done.stdout
        assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr
