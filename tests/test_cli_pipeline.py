"""`scan` in pipelines (--jsonl, --each, --exit-zero, --format sarif) and the command line's rough edges."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_output import UNKNOWN, sarif_validator
from test_scan import OOM, job_log

from denpex_kb.cli import main


@pytest.fixture()
def jobs(tmp_path: Path) -> dict[str, Path]:
    """Three jobs: a merged failing log, a directory of per-rank files (one gzip), a healthy log."""
    merged = tmp_path / "4711.log"
    merged.write_text("\n".join(job_log()) + "\n", encoding="utf-8")
    ranks = tmp_path / "4712"
    ranks.mkdir()
    (ranks / "rank0.log").write_text("step 1 ok\n", encoding="utf-8")
    with gzip.open(ranks / "rank1.log.gz", "wt", encoding="utf-8") as fh:
        fh.write("\n".join(UNKNOWN) + "\n")
    (ranks / ".hidden").write_text("[rank0]: " + OOM + "\n", encoding="utf-8")  # not a rank's log: skipped
    healthy = tmp_path / "4713.log"
    healthy.write_text("step 1 ok\nstep 2 ok\n", encoding="utf-8")
    return {"merged": merged, "ranks": ranks, "healthy": healthy}


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_jsonl_each_is_one_fleet_record_per_job(jobs, capsys):
    from denpex_kb import fleet

    code, out, _ = run(capsys, "scan", "--jsonl", "--each", str(jobs["merged"]), str(jobs["ranks"]), str(jobs["healthy"]))
    assert code == 1
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == 3 and len(out.splitlines()) == 3
    for row in rows:
        assert list(row) == [f.name for f in fleet.SCHEMA] and row["schema_version"] == fleet.SCHEMA_VERSION
    merged, ranks, healthy = rows
    assert (merged["job"], merged["initiating_id"], merged["verdict_retry"]) == (str(jobs["merged"]), "cuda-out-of-memory", "no")
    assert merged["collateral_ids"] == ["nccl-watchdog-timeout", "torchrun-child-failed"]
    # A directory is one job of the files inside it, in order; the per-rank files are read together.
    assert ranks["job"] == str(jobs["ranks"])
    assert ranks["files"] == [str(jobs["ranks"] / "rank0.log"), str(jobs["ranks"] / "rank1.log.gz")]
    assert (ranks["initiating_title"], ranks["initiating_rank"], ranks["verdict_retry"]) == ("KeyError", 1, "unknown")
    assert healthy["initiating_id"] is None and healthy["verdict_retry"] is None and healthy["errors"] == []
    # The same row fleet.scan_batch makes of the same job.
    batch = fleet.scan_batch([str(jobs["merged"]), [str(p) for p in sorted(jobs["ranks"].glob("rank*"))]],
                             names=[str(jobs["merged"]), str(jobs["ranks"])])
    assert batch.to_pylist() == rows[:2]


def test_without_each_all_files_are_one_job(jobs, capsys):
    files = [str(jobs["healthy"]), str(jobs["merged"])]
    code, out, _ = run(capsys, "scan", "--jsonl", *files)
    (row,) = [json.loads(line) for line in out.splitlines()]
    assert code == 1 and row["files"] == sorted(files) and row["job"] == str(jobs["merged"].parent)
    assert row["initiating_id"] == "cuda-out-of-memory"


def test_exit_zero_still_exits_2_on_unreadable_input(jobs, tmp_path, capsys):
    assert run(capsys, "scan", str(jobs["merged"]))[0] == 1
    assert run(capsys, "scan", "--exit-zero", str(jobs["merged"]))[0] == 0
    assert run(capsys, "scan", "--exit-zero", "--jsonl", "--each", str(jobs["merged"]), str(jobs["healthy"]))[0] == 0
    code, out, err = run(capsys, "scan", "--exit-zero", str(tmp_path / "gone.log"))
    assert code == 2 and out == "" and "gone.log: no such file" in err
    code, out, err = run(capsys, "scan", "--exit-zero", "--jsonl", "--each", str(jobs["merged"]), str(tmp_path / "gone.log"))
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 2 and [r["errors"] for r in rows] == [[], [f"{tmp_path / 'gone.log'}: no such file"]]
    assert rows[0]["initiating_id"] == "cuda-out-of-memory"  # the job that was read is still reported
    assert run(capsys, "scan", "--exit-zero", "--exit-by-verdict", str(jobs["merged"]))[0] == 2


def test_one_missing_file_among_several_keeps_the_others_findings(jobs, tmp_path, capsys):
    gone = tmp_path / "rank9.log"
    code, out, err = run(capsys, "scan", "--json", str(jobs["merged"]), str(gone))
    report = json.loads(out)
    assert code == 1 and report["initiating"]["id"] == "cuda-out-of-memory"
    assert report["errors"] == [f"{gone}: no such file"] and report["files"] == [str(jobs["merged"])]
    assert "warning" in err and "rank9.log: no such file" in err
    code, out, _ = run(capsys, "scan", str(jobs["merged"]), str(gone))
    assert code == 1 and f"Warning  {gone}: no such file" in out
    # Nothing read at all: a usage/input error, as for one missing file.
    code, out, err = run(capsys, "scan", str(gone), str(tmp_path / "rank8.log"))
    assert code == 2 and out == "" and "rank9.log: no such file" in err and "rank8.log: no such file" in err


def test_sarif_from_the_command_line_validates(jobs, capsys):
    code, out, _ = run(capsys, "scan", "--format", "sarif", "--each", str(jobs["merged"]), str(jobs["ranks"]))
    doc = json.loads(out)
    sarif_validator().validate(doc)
    assert code == 1
    ids = {r["ruleId"] for r in doc["runs"][0]["results"]}
    assert {"cuda-out-of-memory", "nccl-watchdog-timeout", "unrecognised-exception"} <= ids
    assert doc["runs"][0]["properties"]["jobs"][0]["verdict"]["retry"] == "no"


def test_json_is_unchanged_and_formats_do_not_combine(jobs, capsys):
    code, out, _ = run(capsys, "scan", "--json", str(jobs["merged"]))
    assert code == 1 and set(json.loads(out)) >= {"files", "lines", "verdict", "initiating", "findings"}
    assert run(capsys, "scan", "--format", "json", str(jobs["merged"]))[1] == out
    for args in (("--json", "--format", "sarif"), ("--json", "--jsonl"), ("--each", "--json"), ("--each", "--exit-by-verdict"),
                 ("--each", "--fr", "x")):
        code, _, err = run(capsys, "scan", *args, str(jobs["merged"]))
        assert code == 2 and err.startswith("denpex-kb scan: "), args


def test_text_each_has_a_header_per_job(jobs, tmp_path, capsys):
    code, out, _ = run(capsys, "scan", "--each", str(jobs["healthy"]), str(tmp_path / "gone.log"))
    assert code == 2
    assert out.splitlines() == [f"== {jobs['healthy']}", "No failure found in 2 lines.", "",
                                f"== {tmp_path / 'gone.log'}", f"Not scanned: {tmp_path / 'gone.log'}: no such file"]


def test_empty_inputs_are_usage_errors(capsys):
    assert run(capsys, "scan", "")[0] == 2
    assert run(capsys, "match", "")[0] == 2
    assert run(capsys, "match", "  ")[0] == 2
    result = subprocess.run([sys.executable, "-m", "denpex_kb", "match", "-"], input="\n \n", capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2 and "stdin is empty" in result.stderr


def test_match_exit_codes_are_documented_and_as_scan_with_exit_code(capsys):
    assert run(capsys, "match", OOM)[0] == 0
    assert run(capsys, "match", "--exit-code", OOM)[0] == 1
    assert run(capsys, "match", "--exit-code", "step 1 loss 2.0")[0] == 0
    with pytest.raises(SystemExit):
        main(["match", "--help"])
    assert "Exit status: 0" in " ".join(capsys.readouterr().out.split())
    with pytest.raises(SystemExit):
        main(["scan", "--help"])
    assert "Exit status: 0 no failure found; 1 a failure found" in " ".join(capsys.readouterr().out.split())


def test_unknown_names_are_refused_with_suggestions(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["list", "--phase", "sideways"])
    assert exc.value.code == 2 and "invalid choice" in capsys.readouterr().err
    assert run(capsys, "list", "--phase", "hardware")[0] == 0
    code, _, err = run(capsys, "recipe", "slurm-requeu")
    assert code == 2 and "did you mean slurm-requeue.sh?" in err
    from denpex_kb.commands._common import did_you_mean

    ids = ["cuda-out-of-memory", "nccl-watchdog-timeout", "segmentation-fault", "dataloader-timeout"]
    assert did_you_mean("cuda-out-of-memroy", ids) == "; did you mean cuda-out-of-memory?"
    assert did_you_mean("nccl-timeout", ids) == "; did you mean nccl-watchdog-timeout?"
    assert did_you_mean("zzzz", ids) == ""


def test_compile_and_build_docs_from_an_installed_package(tmp_path, monkeypatch, capsys):
    """An installed package has no kb/ beside it: compile would rewrite the package's own data, build-docs has no
    mkdocs.yml. Both say so before doing anything."""
    import shutil

    from denpex_kb import paths
    from denpex_kb.commands import compile_cmd

    site_packages = tmp_path / "site-packages"
    shipped = site_packages / "denpex_kb" / "kb_source"
    shipped.mkdir(parents=True)
    shutil.copy(Path(__file__).parent.parent / "kb" / "_tags.yaml", shipped / "_tags.yaml")
    bundle = site_packages / "denpex_kb" / "data"
    monkeypatch.setattr(paths, "REPO_DIR", site_packages)
    monkeypatch.setattr(paths, "SHIPPED_KB_DIR", shipped)
    monkeypatch.setattr(paths, "BUNDLE_DIR", bundle)
    monkeypatch.setattr(compile_cmd, "BUNDLE_DIR", bundle)  # whatever happens, never the checkout's bundle
    elsewhere = tmp_path / "work"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, _, err = run(capsys, "compile")
    assert code == 2 and "installed package" in err and "--out DIR" in err
    assert not bundle.exists()
    code, _, err = run(capsys, "build-docs")
    assert code == 2 and "installed package" in err and "--config FILE" in err
    code, _, err = run(capsys, "compile", "--out", str(tmp_path / "out"))
    assert code == 0 and (tmp_path / "out" / "index.json").is_file() and not bundle.exists()
