"""Versions the logs print (denpex_kb/versions.py) and version-aware answers in `match` and `scan`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import KB, entry_yaml
from denpex_kb import scan
from denpex_kb.compiler import index_from_kb_dir
from denpex_kb.matcher import match
from denpex_kb.versions import assess, canonical, read_line, read_versions

# Real lines: captured here (torch 2.13.0 CPU collect_env, DeepSpeed 0.19.7 ds_report and banner) or quoted in
# the entries' examples; the env-report lines are the format strings of transformers' and accelerate's `env`
# commands ("- {}: {}" over their info dicts).
LINES = [
    ("PyTorch version: 2.13.0+cpu", ("torch", "2.13.0+cpu")),
    ("torch version .................... 2.13.0+cpu", ("torch", "2.13.0+cpu")),
    ("deepspeed info ................... 0.19.7, unknown, unknown", ("deepspeed", "0.19.7")),
    ("[2026-11-29 19:14:39,284] [INFO] [logging.py:123:log_dist] [Rank -1] DeepSpeed info: version=0.19.8, "
     "git-hash=unknown, git-branch=unknown", ("deepspeed", "0.19.8")),
    ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1333, "
     "internal error - please report this issue to the NCCL developers, NCCL version 2.18.1", ("nccl", "2.18.1")),
    ("node1:2049:2049 [0] NCCL INFO NCCL version 2.21.5+cuda12.4", ("nccl", "2.21.5+cuda12.4")),
    ("- `transformers` version: 4.46.3", ("transformers", "4.46.3")),
    ("- PyTorch version (GPU?): 2.4.0+cu121 (True)", ("torch", "2.4.0+cu121")),
    ("- Accelerate version: 0.34.2", ("accelerate", "0.34.2")),
    ("- `Accelerate` version: 1.8.1", ("accelerate", "1.8.1")),
    ("- Huggingface_hub version: 0.25.1", ("huggingface-hub", "0.25.1")),
    ("[pip3] nvidia-nccl-cu12==2.21.5", ("nccl", "2.21.5")),
    ("[pip3] torch==2.13.0", ("torch", "2.13.0")),
    ("| NVIDIA-SMI 535.104.05             Driver Version: 535.104.05   CUDA Version: 12.2     |", ("driver", "535.104.05")),
]


@pytest.mark.parametrize(("line", "expected"), LINES)
def test_each_version_line_is_read(line, expected):
    assert read_versions([line]) == dict([expected])


def test_lines_that_only_mention_versions_are_not_read():
    for line in ("Nvidia driver version: Could not collect", "NCCL version mismatch with remote peer",
                 "please upgrade to a newer DeepSpeed version", "loss 2.31 | step 100"):
        assert read_line(line) is None, line


def test_the_first_version_seen_wins_and_prefixes_are_stripped():
    seen = read_versions(["[rank0]: PyTorch version: 2.4.0", "[rank1]: PyTorch version: 2.5.0"])
    assert seen == {"torch": "2.4.0"}


def test_package_names_are_compared_in_normal_form():
    assert canonical("huggingface_hub") == canonical("Huggingface-Hub") == "huggingface-hub"


def test_assessment_says_in_range_outside_and_where_the_range_ends():
    inside = assess({"deepspeed": ">=0.13.5,<0.19.5"}, {"deepspeed": "0.14.2"})
    assert not inside.outside
    assert inside.notes == ("your deepspeed 0.14.2 is in the affected range (>=0.13.5,<0.19.5); deepspeed 0.19.5 "
                            "and later are outside it",)
    later = assess({"deepspeed": ">=0.13.5,<0.19.5"}, {"deepspeed": "0.19.7"})
    assert later.outside and "outside the affected range" in later.notes[0]
    assert assess({"torch": ">=2.6"}, {"torch": "2.6.0a0+git1234"}).outside is False  # a pre-release build
    assert assess({"torch": ">=2.6"}, {"nccl": "2.21.5"}) == ((), False)  # nothing to compare


def _widget(entry_id: str, title: str, text: str, spec: str) -> str:
    return entry_yaml(entry_id, [text], [text], title=title, conditions={"versions": {"widgetlib": spec}})


@pytest.fixture()
def two(tmp_path: Path):
    """Two entries that both match one line, for widgetlib < 2 and >= 2."""
    (tmp_path / "_tags.yaml").write_text((KB / "_tags.yaml").read_text())
    (tmp_path / "old-widget.yaml").write_text(_widget("old-widget", "Old widget failure", "widget spindle jammed", "<2"))
    (tmp_path / "new-widget.yaml").write_text(_widget("new-widget", "New widget failure",
                                                      "widget spindle jammed in the gearbox", ">=2"))
    return index_from_kb_dir(tmp_path, strict=False)


def test_match_ranks_the_entry_the_versions_contradict_last_and_says_why(two):
    line = "widget spindle jammed in the gearbox"
    assert [m.id for m in match(line, index=two)] == ["new-widget", "old-widget"]  # longer signature first
    found = match(f"[pip3] widgetlib==1.4\n{line}", index=two)
    assert [m.id for m in found] == ["old-widget", "new-widget"]  # demoted, not dropped
    assert found[0].version_notes == ("your widgetlib 1.4 is in the affected range (<2); widgetlib 2 and later are "
                                      "outside it",)
    assert "outside the affected range" in found[1].version_notes[0]
    # Versions given by the caller win over the text's.
    given = match(f"[pip3] widgetlib==1.4\n{line}", index=two, versions={"widgetlib": "2.1"})
    assert given[0].id == "new-widget"


def test_scan_reports_the_versions_and_what_they_say_of_the_root_cause(two, tmp_path):
    log = ["[rank0]: [pip3] widgetlib==2.3", "[rank0]: Traceback (most recent call last):",
           "[rank0]: RuntimeError: widget spindle jammed in the gearbox"]
    report = scan(log, index=two)
    assert report.versions == {"widgetlib": "2.3"}
    assert report.initiating is not None and report.initiating.id == "new-widget"
    assert report.version_notes == ("your widgetlib 2.3 is in the affected range (>=2)",)
    data = report.to_dict()
    assert data["versions"] == {"widgetlib": "2.3"} and data["version_notes"] == list(report.version_notes)
    assert scan(log, index=two, versions={"widgetlib": "1.0"}).versions == {"widgetlib": "1.0"}


def test_cli_reads_versions_from_an_env_file(two, tmp_path, capsys):
    from denpex_kb.cli import main

    env = tmp_path / "env.txt"
    env.write_text(textwrap.dedent("""\
        Copy-and-paste the text below in your GitHub issue

        - `Accelerate` version: 1.8.1
        [pip3] widgetlib==1.9
    """))
    assert main(["match", "--kb", two.source, "--env", str(env), "--json", "widget spindle jammed in the gearbox"]) == 0
    matches = json.loads(capsys.readouterr().out)["matches"]
    assert matches[0]["id"] == "old-widget" and matches[0]["version_notes"]
    log = tmp_path / "job.log"
    log.write_text("Traceback (most recent call last):\nRuntimeError: widget spindle jammed in the gearbox\n")
    main(["scan", "--kb", two.source, "--env", str(env), str(log)])
    assert "version your widgetlib 1.9 is outside the affected range (>=2)" in capsys.readouterr().out


def test_a_plain_match_does_not_load_the_version_reader():
    code = ("import sys, denpex_kb; denpex_kb.match('RuntimeError: CUDA error: an illegal memory access was "
            "encountered'); print('denpex_kb.versions' in sys.modules, 'packaging.specifiers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


WORDED = entry_yaml(
    "worded-widget",
    [{"kind": "literal", "text": "widget spindle jammed", "versions": {"widgetlib": "<2"}}, "widget spindle stuck"],
    ["widget spindle jammed"], title="Worded widget failure",
)


@pytest.fixture()
def worded(tmp_path: Path):
    (tmp_path / "_tags.yaml").write_text((KB / "_tags.yaml").read_text())
    (tmp_path / "worded-widget.yaml").write_text(WORDED)
    return index_from_kb_dir(tmp_path, strict=False)


def test_a_wording_says_which_releases_print_it(worded):
    found = match("[rank0]: widget spindle jammed", index=worded)[0]
    assert found.printed_by == (("widgetlib", "<2"),)
    assert found.version_notes == ("this wording is printed by widgetlib <2",)
    assert found.to_dict()["printed_by"] == {"widgetlib": "<2"}
    other = match("widget spindle stuck", index=worded)[0]
    assert other.printed_by == () and other.version_notes == ()


def test_a_wording_the_reported_version_does_not_print_is_pointed_out(worded):
    found = match("widget spindle jammed", index=worded, versions={"widgetlib": "2.3"})[0]
    assert found.id == "worded-widget"  # still the answer: the wording names the failure
    assert found.version_notes[-1].startswith("your widgetlib 2.3 does not print this wording (widgetlib <2 does)")
    inside = match("[pip3] widgetlib==1.9\nwidget spindle jammed", index=worded)[0]
    assert inside.version_notes == ("this wording is printed by widgetlib <2",)


def test_signature_versions_must_be_specifiers(tmp_path: Path):
    from denpex_kb.loader import load_kb

    (tmp_path / "_tags.yaml").write_text((KB / "_tags.yaml").read_text())
    (tmp_path / "worded-widget.yaml").write_text(WORDED.replace('"<2"', '"before two"'))
    kb = load_kb(tmp_path)
    assert any(p.code == "DKB003" and "PEP 440" in p.message for p in kb.problems), [p.render() for p in kb.problems]


def test_the_cli_prints_the_version_notes(worded, tmp_path: Path):
    from denpex_kb.compiler import write_bundle
    from denpex_kb.loader import load_kb

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "_tags.yaml").write_text((KB / "_tags.yaml").read_text())
    (tmp_path / "src" / "worded-widget.yaml").write_text(WORDED)
    write_bundle(load_kb(tmp_path / "src"), tmp_path / "bundle")
    out = subprocess.run([sys.executable, "-m", "denpex_kb", "match", "widget spindle jammed"], capture_output=True,
                         text=True, env={**os.environ, "DENPEX_KB_BUNDLE": str(tmp_path / "bundle")})
    assert "  version: this wording is printed by widgetlib <2" in out.stdout, out.stdout + out.stderr
