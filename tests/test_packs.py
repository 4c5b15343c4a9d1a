"""Third-party packs: a real pack (tests/packs/acme-kb) is installed with pip into a private directory, and the
commands a user runs (list, match, scan, explain, check) are run against it in subprocesses; the merge of a
pack's compiled rows into the shipped bundle is tested in process."""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import variant
from denpex_kb import bundle
from denpex_kb.matcher import match
from denpex_kb.packs import CompiledPack, Pack, compile_pack

PACK_SRC = Path(__file__).parent / "packs" / "acme-kb"
# What ACME's preflight tool prints when a node lost its scratch mount (the pack's entry knows it).
PREFLIGHT = "acme-preflight: /scratch is not mounted on gpu-17"
ENTRY = "acme-scratch-not-mounted"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pack installed by pip, as a user installs it (built with hatchling, the pack's own backend)."""
    if importlib.util.find_spec("hatchling") is None:
        if os.environ.get("CI"):
            pytest.fail("the test extra installs hatchling, which builds the test pack")
        pytest.skip("hatchling is not installed (pip install '.[test]')")
    target = tmp_path_factory.mktemp("pack") / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
         "--target", str(target), str(PACK_SRC)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert (target / "acme_kb" / "kb" / f"{ENTRY}.yaml").is_file()
    return target


def _run(site: Path, tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    here = str(Path(__file__).resolve().parents[1])
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([here, str(site)]),
               "DENPEX_KB_CACHE": str(tmp_path / "cache"), **env}
    environ.pop("DENPEX_KB_BUNDLE", None)
    return subprocess.run([sys.executable, "-m", "denpex_kb", *args], capture_output=True, text=True, env=environ,
                          cwd=tmp_path, timeout=300)


def test_match_names_a_pack_entry_and_says_so(site: Path, tmp_path: Path):
    proc = _run(site, tmp_path, "match", "--exit-code", f"[2026-11-30 10:02:11] {PREFLIGHT}")
    assert proc.returncode == 1, proc.stderr  # found
    first = proc.stdout.splitlines()[0]
    assert first.startswith(f"{ENTRY}  (setup")
    assert "pack:    acme" in proc.stdout
    assert f"https://wiki.acme.example/denpex/{ENTRY}" in proc.stdout  # the pack's own page, not the hub's
    assert list((tmp_path / "cache").glob("acme-*.json")), "the compiled pack is cached"
    again = _run(site, tmp_path, "match", "--json", PREFLIGHT)
    (m,) = json.loads(again.stdout)["matches"]
    assert (m["id"], m["pack"], m["values"]["host"]) == (ENTRY, "acme", "gpu-17")


def test_core_entries_still_answer_with_a_pack_installed(site: Path, tmp_path: Path):
    proc = _run(site, tmp_path, "match", "--json",
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 4.00 GiB of which 2.35 GiB is free.")
    top = json.loads(proc.stdout)["matches"][0]
    assert (top["id"], top["pack"]) == ("cuda-out-of-memory", None)
    assert top["url"].startswith("https://")


def test_list_scan_and_explain_include_the_pack(site: Path, tmp_path: Path):
    listed = _run(site, tmp_path, "list")
    (row,) = [line for line in listed.stdout.splitlines() if line.startswith(ENTRY)]
    assert row.endswith("[pack acme]")
    as_json = {e["id"]: e for e in json.loads(_run(site, tmp_path, "list", "--json").stdout)}
    assert as_json[ENTRY]["pack"] == "acme" and as_json["cuda-out-of-memory"]["pack"] is None
    log = tmp_path / "job.log"
    log.write_text(f"[rank0]: step 1\n{PREFLIGHT}\nsrun: error: gpu-17: task 0: Exited with exit code 1\n", encoding="utf-8")
    scanned = _run(site, tmp_path, "scan", str(log))
    assert f"Initiating failure  {ENTRY}" in scanned.stdout and "from the installed pack acme" in scanned.stdout
    report = json.loads(_run(site, tmp_path, "scan", "--json", str(log)).stdout)
    assert (report["initiating"]["id"], report["pack"]) == (ENTRY, "acme")
    explained = _run(site, tmp_path, "explain", ENTRY)
    assert explained.returncode == 0 and "ACME preflight finds /scratch not mounted" in explained.stdout


def test_packs_can_be_turned_off(site: Path, tmp_path: Path):
    proc = _run(site, tmp_path, "match", "--exit-code", PREFLIGHT, DENPEX_KB_NO_PACKS="1")
    assert proc.returncode == 0 and ENTRY not in proc.stdout  # nothing found


def test_check_holds_pack_entries_to_the_rules(site: Path, tmp_path: Path, make_kb):
    kb = make_kb()
    clean = _run(site, tmp_path, "check", "--kb", str(kb))
    assert clean.returncode == 0, clean.stdout + clean.stderr
    broken_site = tmp_path / "broken-site"
    shutil.copytree(site, broken_site)
    bad = broken_site / "acme_kb" / "kb" / "acme-bad-tag.yaml"
    bad.write_text(variant(("demo-device-mismatch", "acme-bad-tag"), ("[pytorch, tensors, crash]", "[pytorch, no-such-tag]")),
                   encoding="utf-8")
    failed = _run(broken_site, tmp_path, "check", "--kb", str(kb))
    assert failed.returncode == 1
    assert "acme-bad-tag.yaml" in failed.stdout and "no-such-tag" in failed.stdout
    skipped = _run(broken_site, tmp_path, "check", "--kb", str(kb), "--no-packs")
    assert skipped.returncode == 0, skipped.stdout


def test_a_broken_pack_is_left_out_with_a_warning(site: Path, tmp_path: Path):
    broken_site = tmp_path / "broken-site"
    shutil.copytree(site, broken_site)
    shutil.rmtree(broken_site / "acme_kb")  # the entry point now names a module that is gone
    proc = _run(broken_site, tmp_path, "match", "--json", "CUDA error: an illegal memory access was encountered")
    assert "pack 'acme' left out" in proc.stderr
    assert json.loads(proc.stdout)["matches"][0]["id"] == "cuda-illegal-memory-access"


def _pack_from(root: Path, name: str = "demo") -> CompiledPack:
    return compile_pack(Pack(name, f"{name}-kb", "0.1", root))


def _core() -> tuple[dict, object, object]:
    index = json.loads(bundle._read_packaged(bundle.INDEX_FILE))
    return index, lambda: json.loads(bundle._read_packaged(bundle.ENTRIES_FILE)), bundle._packaged_fuzzy


def test_merged_index_matches_pickles_and_keeps_the_core(make_kb):
    merged = bundle.with_packs(*_core(), [_pack_from(make_kb())], "test")
    line = "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
    (m,) = [m for m in match(line, index=merged) if m.id == "demo-device-mismatch"]
    assert m.pack == "demo" and m.url == ""  # the pack names no page
    assert merged.by_id["cuda-out-of-memory"].pack is None
    assert merged.full_entries["demo-device-mismatch"]["title"] == "Tensors on different devices"
    again = pickle.loads(pickle.dumps(merged))
    assert [e.id for e in again.entries] == [e.id for e in merged.entries]
    assert again.by_id["demo-device-mismatch"].pack == "demo"
    assert merged.fuzzy is not None  # the merged fuzzy data carries the merged digest


def test_a_pack_cannot_redefine_an_entry(make_kb, capsys: pytest.CaptureFixture[str]):
    taken = variant(("id: demo-device-mismatch", "id: cuda-out-of-memory"))
    root = make_kb({"cuda-out-of-memory.yaml": taken}, with_good=False)
    merged = bundle.with_packs(*_core(), [_pack_from(root)], "test")
    assert "entry 'cuda-out-of-memory' left out, the id is taken" in capsys.readouterr().err
    assert merged.by_id["cuda-out-of-memory"].pack is None
    assert len(merged.entries) == len(bundle.default_index().entries)


def test_the_quick_look_for_packs_says_no_only_where_there_are_none(site: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch):
    # Said "no", importlib.metadata is not asked at all: so "no" must be true. Asked for real, it agrees.
    from importlib.metadata import entry_points

    from denpex_kb.pack_probe import GROUP, may_declare_packs

    bare = tmp_path / "bare"
    (bare / "other-1.0.dist-info").mkdir(parents=True)
    (bare / "other-1.0.dist-info" / "entry_points.txt").write_text("[console_scripts]\nother = other:main\n")
    for path, declared in (([str(bare), str(tmp_path / "missing")], False), ([str(bare), str(site)], True)):
        monkeypatch.setattr(sys, "path", path)
        assert may_declare_packs() is declared
        assert bool(list(entry_points(group=GROUP))) is declared
    archive = tmp_path / "lib.zip"  # not read plainly: left to importlib.metadata
    archive.write_bytes(b"PK\x05\x06" + bytes(18))
    monkeypatch.setattr(sys, "path", [str(bare), str(archive)])
    assert may_declare_packs() is True
