"""The contributor toolkit on a temporary knowledge base: new -> fill -> fmt -> check -> test.

Also the two mistakes `test` exists to catch: a generic signature shadowing a specific entry (DKB202), and a
signature so generic it fires on healthy training output (DKB205/DKB204).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from ruamel.yaml import YAML

import denpex_kb
from conftest import entry_yaml, variant
from denpex_kb.cli import main
from denpex_kb.formatting import format_text
from denpex_kb.scaffold import derive_id, placeholders, propose, template_for, template_matches
from denpex_kb.yamlio import load_text

OOM_LINE = (
    "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity "
    "of 4.00 GiB of which 2.35 GiB is free."
)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture()
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # The benign corpus is looked up next to kb/ and in the working directory: keep the real one out.
    monkeypatch.chdir(tmp_path)
    return tmp_path


# --- signature proposal ------------------------------------------------------------------------------------


def test_template_masks_variable_parts_and_escapes_braces() -> None:
    line = "Found {dtype} at /home/u/x.py with 2.00 GiB, code 0x7f3e, 12 times"
    template = template_for(line)
    assert template == "Found {{dtype}} at {path} with {size}, code {hex}, {num} times"
    assert template_matches(template, line)


def test_proposal_drops_prefixes_and_exception_class_and_matches_the_line() -> None:
    proposal = propose(OOM_LINE)
    assert proposal.text.startswith("torch.OutOfMemoryError: CUDA out of memory")
    assert proposal.template == (
        "CUDA out of memory. Tried to allocate {size}. GPU {num} has a total capacity of {size} of which {size} is free."
    )
    assert template_matches(proposal.template, proposal.text)
    assert derive_id(proposal.text) == "cuda-out-of-memory"


def test_short_message_keeps_its_exception_class() -> None:
    proposal = propose("KeyError: 'model'")
    assert proposal.template == "KeyError: 'model'"
    assert derive_id(proposal.text) == "key-error-model"


# --- new ---------------------------------------------------------------------------------------------------


def test_scaffold_is_invalid_exactly_at_its_placeholders(make_kb, in_tmp, capsys) -> None:
    kb = make_kb()
    code, out, err = run(capsys, "new", "--from-text", OOM_LINE, "--kb", str(kb))
    assert code == 0, err
    path = kb / "cuda-out-of-memory.yaml"
    assert "created kb/cuda-out-of-memory.yaml" in out
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# yaml-language-server: $schema=../schema/entry.schema.json\n")
    assert "status: draft" in text and f'since: "{denpex_kb.__version__}"' in text
    doc = load_text(text)
    assert doc["examples"]["match"][0]["text"] == OOM_LINE
    assert doc["examples"]["match"][0]["source"] == "captured: <fill in software and version>"
    assert doc["signatures"][0]["kind"] == "template"

    spots = {(line, col) for _loc, line, col in placeholders(doc)}
    code, out, _ = run(capsys, "check", "--kb", str(kb), "--format", "json")
    assert code == 1
    reported = [p for p in json.loads(out)["problems"] if p["path"] == "kb/cuda-out-of-memory.yaml"]
    assert reported and all(p["code"] == "DKB003" for p in reported)
    # Every problem is at a placeholder, and every placeholder the schema rejects is reported. The source
    # placeholder is a valid provenance string, so only `new`'s own list names it (see CONTRIBUTING.md).
    assert {(p["line"], p["col"]) for p in reported} == spots - {
        (line, col) for loc, line, col in placeholders(doc) if loc[-1] == "source" and loc[2] == 0
    }
    # The scaffold is already in the canonical layout.
    assert format_text(text) == text


def test_a_scaffold_being_filled_in_is_counted_by_check_and_left_out_by_match_and_scan(make_kb, in_tmp, capsys) -> None:
    kb = make_kb()
    line = "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
    code, out, err = run(capsys, "new", "--from-text", "RuntimeError: widget exploded at step 12", "--kb", str(kb))
    assert code == 0, err
    (scaffold,) = [p for p in kb.glob("*.yaml") if p.name not in ("_tags.yaml", "demo-device-mismatch.yaml")]
    code, _out, err = run(capsys, "check", "--kb", str(kb), "--no-examples")
    assert code == 1 and "2 files checked" in err  # the scaffold is read, and counted, although it does not load
    code, out, err = run(capsys, "match", "--kb", str(kb), line)
    assert code == 0 and out.startswith("demo-device-mismatch")
    assert f"{scaffold.name} left out: it has errors" in err
    log = in_tmp / "job.log"
    log.write_text(f"step 1\n{line}\n", encoding="utf-8")
    code, out, err = run(capsys, "scan", "--kb", str(kb), str(log))
    assert code == 1 and "demo-device-mismatch" in out and f"{scaffold.name} left out" in err
    (kb / "demo-device-mismatch.yaml").unlink()  # nothing usable is left: a usage error, as before
    code, _out, err = run(capsys, "match", "--kb", str(kb), line)
    assert code == 2 and "no entry file without errors" in err


def test_new_lists_places_to_fill_and_accepts_phase(make_kb, in_tmp, capsys) -> None:
    kb = make_kb()
    code, out, err = run(capsys, "new", "nccl-test-failure", "--phase", "communication", "--kb", str(kb))
    assert code == 0, err
    doc = load_text((kb / "nccl-test-failure.yaml").read_text(encoding="utf-8"))
    assert doc["phase"] == "communication"
    for loc, line, col in placeholders(doc):
        assert f"kb/nccl-test-failure.yaml:{line}:{col}: {'.'.join(map(str, loc))}" in out


def test_new_warns_when_the_line_looks_known(make_kb, in_tmp, capsys) -> None:
    kb = make_kb()
    line = "[rank1]: RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:1 and cpu!"
    code, _out, err = run(capsys, "new", "device-mismatch-again", "--from-text", line, "--kb", str(kb))
    assert code == 0
    assert "this looks like demo-device-mismatch (" in err and "run `denpex-kb match` first" in err


@pytest.mark.parametrize(
    ("name", "text", "args", "message"),
    [
        ("existing", None, ["demo-device-mismatch"], "already exists"),
        ("invalid", None, ["Not_Kebab"], "is not a valid id"),
        (
            "retired",
            "id: old-failure\ntitle: An old failure\nstatus: removed\nsince: 0.1.0\n"
            "replaced_by: demo-device-mismatch\nreason: merged into demo-device-mismatch\n",
            ["old-failure"],
            "was retired (replaced by demo-device-mismatch)",
        ),
        ("no id", None, [], "give the new entry's ID"),
    ],
)
def test_new_refuses(make_kb, in_tmp, capsys, name, text, args, message) -> None:
    kb = make_kb({"old-failure.yaml": text} if text else None)
    before = sorted(p.name for p in kb.iterdir())
    code, _out, err = run(capsys, "new", *args, "--kb", str(kb))
    assert code == 2, name
    assert message in err
    assert sorted(p.name for p in kb.iterdir()) == before


# --- the whole walk ------------------------------------------------------------------------------------------


def _fill(path: Path) -> None:
    """What a contributor does by hand, done with a round-trip editor so the comments stay."""
    y = YAML(typ="rt")
    y.preserve_quotes = True
    y.width = 100_000
    y.indent(mapping=2, sequence=4, offset=2)
    doc = y.load(path.read_text(encoding="utf-8"))
    doc["title"] = "CUDA out of memory"
    doc["summary"] = "The CUDA caching allocator could not find a free block big enough for a new tensor."
    doc["tags"][0] = "pytorch"
    doc["tags"].extend(["allocator", "oom"])
    doc["phase"] = "forward"
    doc["severity"] = "high"
    doc["signatures"][0]["text"] = "CUDA out of memory. Tried to allocate {size:requested}"
    doc["symptoms"][0] = "The step dies with an out-of-memory error naming a size."
    doc["causes"][0] = "The working set is larger than the free device memory."
    doc["conditions"]["notes"][0] = "Any PyTorch release with the caching allocator."
    doc["checklist"][0] = "The line says CUDA out of memory, not a host allocator error."
    doc["fix"]["summary"] = "Shrink the per-GPU working set."
    doc["fix"]["body"] = "Halve the micro-batch and double gradient accumulation.\nEnable activation checkpointing.\n"
    doc["response"].update(retry="no", blame="config")
    doc["commands"][0].update(purpose="diagnose", description="Show memory per GPU.", run="nvidia-smi")
    doc["related"][0].update(id="demo-device-mismatch", relation="sibling")
    doc["references"][0].update(url="https://pytorch.org/docs/stable/notes/cuda.html", title="CUDA semantics")
    match = doc["examples"]["match"]
    match[0]["source"] = "https://github.com/jhc13/taggui/issues/188"
    for item, (text, source) in zip(  # noqa: B905 - the entry may have more examples than are replaced here
        match[1:],
        [
            ("RuntimeError: CUDA out of memory. Tried to allocate 74.00 MiB (GPU 0; 11.91 GiB total capacity)",
             "https://github.com/RistoranteRist/FastFlow/issues/4"),
            ("ERROR 04-01 23:46:56 [engine.py:160] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 546.00 MiB.",
             "https://github.com/kaito-project/kaito/issues/976"),
            ("  0: torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.78 GiB",
             "https://github.com/HKUDS/RecDiff/issues/4"),
        ],
    ):
        item.update(text=text, source=source)
    no_match = doc["examples"]["no_match"]
    no_match[0]["text"] = "|            CUDA OOMs: 0            |        cudaMalloc retries: 0         |"
    no_match[1]["text"] = "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
    # Deliberately out of order, as hand edits often are: fmt puts it back.
    doc.move_to_end("title")
    out = io.StringIO()
    y.dump(doc, out)
    path.write_text(out.getvalue(), encoding="utf-8")


def test_scaffold_fill_fmt_check_test(make_kb, in_tmp, capsys) -> None:
    kb = make_kb()
    assert run(capsys, "new", "--from-text", OOM_LINE, "--kb", str(kb))[0] == 0
    path = kb / "cuda-out-of-memory.yaml"
    _fill(path)
    code, out, _ = run(capsys, "fmt", "--check", "--kb", str(kb))
    assert code == 1 and "would reformat kb/cuda-out-of-memory.yaml" in out
    assert run(capsys, "fmt", "--kb", str(kb))[0] == 0
    text = path.read_text(encoding="utf-8")
    assert text.index("\ntitle:") < text.index("\nsummary:")
    assert "# A short name for the failure" in text  # comments survive the fill and the reorder
    assert "body: |\n    Halve the micro-batch" in text
    assert run(capsys, "fmt", "--check", "--kb", str(kb))[0] == 0  # idempotent
    code, out, err = run(capsys, "check", "--kb", str(kb))
    assert code == 0, out + err
    code, out, err = run(capsys, "test", "--kb", str(kb))
    assert code == 0, out + err
    assert "ok   cuda-out-of-memory: 4 true positives" in out


# --- what `test` catches -------------------------------------------------------------------------------------


def test_generic_signature_shadowing_a_specific_entry_is_dkb202(make_kb, in_tmp, capsys) -> None:
    generic = entry_yaml(
        "tensor-device-generic", ["Expected all tensors to be on the same device, but"],
        [{"text": "RuntimeError: Expected all tensors to be on the same device, but got index is on cpu, different from other tensors on cuda:0 (when checking argument in method wrapper_CUDA__index_select)",
          "source": "captured: torch 2.13.0 (CPU)"}],
    )
    # The generic signature also matches the specific entry's example and holds more fixed text than the specific
    # one, so it ranks first and the specific entry is never reported.
    specific = entry_yaml(
        "tensor-two-devices", ["but found at least two devices"],
        [{"text": "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
          "source": "captured: torch 2.13.0 (CPU)"}],
    )
    kb = make_kb({"tensor-device-generic.yaml": generic, "tensor-two-devices.yaml": specific}, with_good=False)
    code, out, err = run(capsys, "test", "--kb", str(kb), "--format", "json")
    assert code == 1, err
    problems = json.loads(out)["problems"]
    shadow = [p for p in problems if p["code"] == "DKB202"]
    assert len(shadow) == 1
    assert shadow[0]["path"] == "kb/tensor-two-devices.yaml"
    assert "tensor-device-generic" in shadow[0]["message"] and "tensor-two-devices" in shadow[0]["message"]
    assert "more specific" in shadow[0]["message"]


def test_too_generic_signature_fires_on_the_benign_corpus(make_kb, in_tmp, capsys) -> None:
    generic = entry_yaml(
        "nccl-anything", ["NCCL INFO"],
        [{"text": "node1:1234:1290 [0] NCCL INFO Call to connect returned Connection refused, retrying",
          "source": "captured: nccl 2.21.5"}],
    )
    kb = make_kb({"nccl-anything.yaml": generic})
    benign = in_tmp / "tests" / "corpus" / "benign"
    benign.mkdir(parents=True)
    (benign / "x.log").write_text(
        "node1:1234:1234 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
        "node1:1234:1234 [0] NCCL INFO NET/Plugin: No plugin found (libnccl-net.so), using internal implementation\n"
        "node1:1234:1290 [0] NCCL INFO Using network Socket\n"
        "node1:1234:1290 [0] NCCL INFO comm 0x55d5c0a0 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\n"
        "Epoch 1: 100%|##########| 500/500 [01:02<00:00, 8.01it/s, loss=0.231]\n",
        encoding="utf-8",
    )
    code, out, _err = run(capsys, "test", "--kb", str(kb), "--format", "json")
    assert code == 1
    problems = json.loads(out)["problems"]
    too_generic = [p for p in problems if p["code"] == "DKB205"]
    assert len(too_generic) == 1 and too_generic[0]["path"] == "kb/nccl-anything.yaml"
    assert "too generic: add the words that only the failure prints" in too_generic[0]["message"]
    findings = [p for p in problems if p["code"] == "DKB204"]
    assert findings and all(p["path"].endswith("x.log") for p in findings)
    assert all("make the entry's signature more specific" in p["message"] for p in findings)
    # The good entry stays clean: only the generic one is blamed.
    assert not [p for p in problems if "demo-device-mismatch" in p["message"]]


# --- fmt on broken input ---------------------------------------------------------------------------------------


def test_fmt_reports_a_parse_error_and_leaves_the_file(make_kb, in_tmp, capsys) -> None:
    broken = variant(("phase: forward", "phase: [forward"))
    kb = make_kb({"broken.yaml": broken})
    code, _out, err = run(capsys, "fmt", "--kb", str(kb))
    assert code == 1
    assert "kb/broken.yaml:" in err and "left unchanged" in err
    line = err.split("kb/broken.yaml:", 1)[1].split(":")
    assert line[0].isdigit() and line[1].isdigit()
    assert (kb / "broken.yaml").read_text(encoding="utf-8") == broken


def test_fmt_skips_support_files_and_rejects_missing_paths(make_kb, in_tmp, capsys) -> None:
    kb = make_kb()
    tags = (kb / "_tags.yaml").read_text(encoding="utf-8")
    assert run(capsys, "fmt", str(kb / "_tags.yaml"), str(kb / "demo-device-mismatch.yaml"))[0] == 0
    assert (kb / "_tags.yaml").read_text(encoding="utf-8") == tags
    assert run(capsys, "fmt", str(kb / "nope.yaml"))[0] == 2
