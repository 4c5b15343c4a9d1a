"""Fleet triage: `denpex_kb.fleet.scan_batch` over many jobs (paths, bytes, per-rank groups) into one Arrow batch
of plain columns, a picklable index, and the same rows out of Spark's `mapInArrow` as out of a plain loop.

The jobs are assembled from real lines: the knowledge base's match examples (each with its provenance) on one
rank, healthy output from tests/corpus/benign/ on every rank, and real collateral (NCCL watchdog timeouts, the
torchrun launcher's summary) on the others.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import pickle
import random
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from test_scan import FAILED, HEALTHY, OOM, WATCHDOG

import denpex_kb
from denpex_kb import scan, scan_many

REPO = Path(__file__).resolve().parent.parent
KB_DIR = REPO / "kb"
BENIGN = Path(__file__).resolve().parent / "corpus" / "benign"
IN_CI = bool(os.environ.get("CI"))


def _unavailable(reason: str) -> None:
    """Skip on a developer's machine; in CI a missing piece is a failure, so the fleet tests always run there."""
    if IN_CI:
        pytest.fail(f"{reason} (CI must run this test: see .ci/run)")
    pytest.skip(reason)


try:
    import pyarrow as pa

    from denpex_kb import fleet
except ImportError:  # pragma: no cover - only where the extra is not installed
    pa = fleet = None  # type: ignore[assignment]


@pytest.fixture(autouse=True)
def _needs_pyarrow() -> None:
    if fleet is None:
        _unavailable("pyarrow is not installed: pip install 'denpex-kb[fleet]'")


# ---------------------------------------------------------------------------------------------------------------
# Generated jobs, from real lines (shared with benchmarks/fleet_bench.py)

_RANK_PREFIX = re.compile(r"^\[rank\d+\]:")


def benign_lines() -> list[str]:
    lines = []
    for path in sorted(BENIGN.glob("*.log")):
        lines += [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip() and not ln.startswith("# ")]
    return lines


def kb_examples() -> list[tuple[str, str, list[str]]]:
    """(entry id, phase, lines) of every match example in kb/: real text, each with its provenance."""
    from denpex_kb.loader import load_kb

    kb = load_kb(KB_DIR)
    out = []
    for entry_id, entry in sorted(kb.entries.items()):
        phase = getattr(entry.phase, "value", str(entry.phase))
        for example in entry.examples.match:
            assert example.source  # provenance: an issue URL, "source: ..." or "captured: ..."
            out.append((entry_id, phase, example.text.splitlines()))
    return out


def _by_id(examples: list[tuple[str, str, list[str]]], entry_id: str) -> list[list[str]]:
    return [lines for eid, _, lines in examples if eid == entry_id]


def make_jobs(root: Path, n: int, *, seed: int = 7, lines_per_rank: int = 40,
              examples: list[tuple[str, str, list[str]]] | None = None) -> list[tuple[str, list[str]]]:
    """Write `n` multi-rank jobs under `root`; returns (job name, its files). Half are per-rank file groups (one
    file per rank, plus the launcher's own log), half merged logs with rank prefixes; files are plain or gzip.
    One job in eight is healthy."""
    rng = random.Random(seed)
    examples = examples if examples is not None else kb_examples()
    healthy = benign_lines()
    watchdog = _by_id(examples, "nccl-watchdog-timeout")
    launcher = _by_id(examples, "torchrun-child-failed")
    jobs: list[tuple[str, list[str]]] = []
    for j in range(n):
        ranks = rng.choice((2, 4, 8))
        merged = j % 2 == 1
        style = rng.choice(("torchrun", "srun"))
        events: list[tuple[float, int | None, str]] = []  # (time, rank or None for the launcher, line)
        for r in range(ranks):
            start = rng.randrange(len(healthy))
            for k in range(lines_per_rank):
                events.append((k + rng.random(), r, healthy[(start + k) % len(healthy)]))
        failing = j % 8 != 0
        if failing:
            _entry_id, phase, lines = rng.choice(examples)
            at = rng.randrange(lines_per_rank // 2, lines_per_rank) + 0.5
            r0 = rng.randrange(ranks)
            bare = phase == "hardware"  # kernel-log lines keep their own prefixes
            events += [(at + k * 1e-3, None if bare else r0, line) for k, line in enumerate(lines)]
            if rng.random() < 0.6 and watchdog:
                wd = rng.choice(watchdog)
                for r in range(ranks):
                    if r != r0:
                        events += [(lines_per_rank + 1 + k * 1e-3, r, line) for k, line in enumerate(wd)]
            if rng.random() < 0.7 and launcher:
                events += [(lines_per_rank + 2 + k * 1e-3, None, line) for k, line in enumerate(rng.choice(launcher))]
        events.sort(key=lambda e: e[0])
        gz = rng.random() < 0.4
        suffix = ".log.gz" if gz else ".log"
        job_dir = root / f"job-{j:04d}"
        job_dir.mkdir(parents=True)
        if merged:
            text = [_prefixed(line, r, style) for _, r, line in events]
            files = {job_dir / f"job{suffix}": text}
        else:
            files = {job_dir / f"rank{r}{suffix}": [line for _, er, line in events if er == r] for r in range(ranks)}
            files[job_dir / f"launcher{suffix}"] = [line for _, er, line in events if er is None]
        for path, lines in files.items():
            data = ("\n".join(lines) + "\n").encode("utf-8")
            path.write_bytes(gzip.compress(data, mtime=0) if gz else data)
        jobs.append((job_dir.name, sorted(str(p) for p in files)))
    return jobs


def _prefixed(line: str, rank: int | None, style: str) -> str:
    if rank is None:
        return line
    if _RANK_PREFIX.match(line):
        return _RANK_PREFIX.sub(f"[rank{rank}]:", line)
    return f"[rank{rank}]: {line}" if style == "torchrun" else f"{rank}: {line}"


@pytest.fixture(scope="module")
def examples() -> list[tuple[str, str, list[str]]]:
    return kb_examples()


@pytest.fixture(scope="module")
def fleet_jobs(tmp_path_factory: pytest.TempPathFactory, examples: list[Any]) -> list[tuple[str, list[str]]]:
    return make_jobs(tmp_path_factory.mktemp("fleet"), 240, examples=examples)


def plain_loop(jobs: list[tuple[str, list[str]]]) -> list[dict[str, Any]]:
    """The reference: one scan_batch call per job, in a plain Python loop."""
    return [fleet.scan_batch([paths], names=[name]).to_pylist()[0] for name, paths in jobs]


# ---------------------------------------------------------------------------------------------------------------
# A real multi-rank job (the fixture of tests/test_scan.py), in every form a job can take

def oom_job() -> bytes:
    lines = list(HEALTHY)
    lines += ["[rank3]: Traceback (most recent call last):", '[rank3]:   File "train.py", line 88, in <module>',
              f"[rank3]: {OOM}"]
    lines += [f"[rank{r}]:{WATCHDOG}" for r in (0, 1, 2, 4, 5, 6, 7)]
    lines += [FAILED]
    return ("\n".join(lines) + "\n").encode()


SCHEMA_COLUMNS = [
    "schema_version", "job", "files", "initiating_id", "initiating_title", "initiating_rank", "initiating_host",
    "initiating_line_number", "initiating_text", "initiating_tier", "fix", "url", "verdict_retry", "verdict_blame",
    "verdict_exclude", "collateral_ids", "collateral_count", "versions", "errors",
]


def test_schema_is_published_versioned_and_plain():
    assert fleet.SCHEMA.names == SCHEMA_COLUMNS
    assert isinstance(fleet.SCHEMA_VERSION, int) and fleet.SCHEMA_VERSION >= 1
    assert fleet.SCHEMA.metadata[b"denpex_kb.schema_version"] == str(fleet.SCHEMA_VERSION).encode()
    for field in fleet.SCHEMA:  # plain columns: strings, integers, lists of strings; nothing pickled
        assert field.type in (pa.string(), pa.int32(), pa.int64(), pa.list_(pa.string())), field
    for name in ("verdict_exclude", "collateral_ids", "versions", "errors", "files"):
        assert fleet.SCHEMA.field(name).type == pa.list_(pa.string())
    batch = fleet.scan_batch([oom_job()])
    assert batch.schema == fleet.SCHEMA and batch.schema.metadata == fleet.SCHEMA.metadata
    assert fleet.spark_ddl().startswith("schema_version INT, job STRING, files ARRAY<STRING>")


def test_every_form_of_a_job_gives_the_same_row(tmp_path: Path):
    data = oom_job()
    merged = tmp_path / "job.log"
    merged.write_bytes(data)
    cut = data.index(b"[rank3]: Traceback")
    part0, part1 = tmp_path / "part0.log", tmp_path / "part1.log.gz"
    part0.write_bytes(data[:cut])
    part1.write_bytes(gzip.compress(data[cut:]))
    jobs = [data, gzip.compress(data), bz2.compress(data), lzma.compress(data), str(merged), merged,
            gzip.compress(data[:cut]) + gzip.compress(data[cut:])]  # two gzip members, as `cat a.gz b.gz` makes
    batch = fleet.scan_batch(jobs)
    assert batch.num_rows == len(jobs)
    rows = batch.to_pylist()
    reference = scan(merged)
    for row in rows:
        assert row["schema_version"] == fleet.SCHEMA_VERSION
        assert row["initiating_id"] == "cuda-out-of-memory" == reference.initiating.id
        assert (row["initiating_rank"], row["initiating_line_number"]) == (3, reference.initiating.line_number)
        assert row["initiating_text"] == reference.initiating.text
        assert row["initiating_title"] == reference.initiating.title
        assert row["verdict_retry"] == reference.verdict.retry == "no"
        assert row["verdict_blame"] == reference.verdict.blame
        assert row["fix"] == reference.info.fix and row["url"] == reference.info.url
        assert row["collateral_ids"] == ["nccl-watchdog-timeout", "torchrun-child-failed"]
        assert row["collateral_count"] == len(reference.collateral)
        assert row["errors"] == []
    assert [r["job"] for r in rows[:4]] == ["#0", "#1", "#2", "#3"]
    assert rows[4]["job"] == str(merged) and rows[4]["files"] == [str(merged)]
    # A group of per-rank files is one job: its files sorted, as scan_many reads them.
    group = fleet.scan_batch([[str(part1), str(part0)]], names=["job-42"]).to_pylist()[0]
    many = scan_many([part1, part0])
    assert group["job"] == "job-42" and group["files"] == [str(part0), str(part1)]
    assert group["initiating_id"] == many.initiating.id == "cuda-out-of-memory"
    assert group["initiating_line_number"] == many.initiating.line_number
    assert fleet.scan_batch([[part0, part1]]).to_pylist()[0]["job"] == str(tmp_path)  # the group's directory
    # Bytes groups, and a mapping from names to jobs.
    by_name = fleet.scan_batch({"a": [data[:cut], gzip.compress(data[cut:])], "b": b"all good\n"}).to_pylist()
    assert [r["job"] for r in by_name] == ["a", "b"]
    assert by_name[0]["files"] == ["<bytes 0>", "<bytes 1>"] and by_name[0]["initiating_id"] == "cuda-out-of-memory"
    assert by_name[1]["initiating_id"] is None and by_name[1]["verdict_retry"] is None and by_name[1]["errors"] == []


def test_unreadable_jobs_are_rows_with_errors_not_crashes(tmp_path: Path):
    data = oom_job()
    zstd = b"\x28\xb5\x2f\xfd" + b"\x00" * 32
    (tmp_path / "a.zip").write_bytes(b"PK\x03\x04" + b"\x00" * 30)
    good = tmp_path / "good.log"
    good.write_bytes(data)
    truncated = gzip.compress(data)[:-200]
    jobs = [zstd, truncated, str(tmp_path / "missing.log"), str(tmp_path), [], 42, bz2.compress(data)[:-50],
            [str(good), zstd], gzip.compress(data) + b"not gzip", str(tmp_path / "a.zip"), data]
    rows = fleet.scan_batch(jobs).to_pylist()
    assert len(rows) == len(jobs)
    assert "zstd" in rows[0]["errors"][0] and rows[0]["initiating_id"] is None
    assert "truncated" in rows[1]["errors"][0] and rows[1]["initiating_id"] == "cuda-out-of-memory"  # what was read
    assert "no such file" in rows[2]["errors"][0]
    assert "directory" in rows[3]["errors"][0]
    assert rows[4]["errors"] == ["an empty job: no files"]
    assert "not int" in rows[5]["errors"][0]
    assert "truncated" in rows[6]["errors"][0]
    # One unreadable member of a group: the others are still scanned, and the row says what was skipped.
    assert rows[7]["initiating_id"] == "cuda-out-of-memory" and len(rows[7]["errors"]) == 1
    assert "zstd" in rows[7]["errors"][0]
    assert rows[8]["initiating_id"] == "cuda-out-of-memory" and "not gzip" in rows[8]["errors"][0]
    assert "zip archive" in rows[9]["errors"][0]
    assert rows[10]["initiating_id"] == "cuda-out-of-memory" and rows[10]["errors"] == []
    for row in rows:
        assert set(row) == set(SCHEMA_COLUMNS)


def test_index_is_loaded_once_per_process(monkeypatch: pytest.MonkeyPatch):
    calls = []
    real = fleet.default_index

    def counting() -> Any:
        calls.append(1)
        return real()

    monkeypatch.setattr(fleet, "default_index", counting)
    monkeypatch.setattr(fleet, "_INDEX", None)
    for _ in range(3):
        fleet.scan_batch([oom_job(), b"healthy\n"])
    assert len(calls) == 1
    assert fleet.shared_index() is fleet.shared_index()
    # A pickled copy (as Spark ships one inside a closure, once per task) folds onto the process's first copy.
    copy = pickle.loads(pickle.dumps(fleet.shared_index()))
    assert copy is not fleet.shared_index() and fleet.shared_index(copy) is fleet.shared_index()


def test_importing_denpex_kb_does_not_import_pyarrow():
    code = ("import sys, denpex_kb; denpex_kb.scan(['step 1 | loss 2.0']); denpex_kb.match('x');"
            "print('pyarrow' in sys.modules, 'denpex_kb.fleet' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_fleet_without_pyarrow_names_the_extra():
    code = ("import sys; sys.modules['pyarrow'] = None\n"
            "try:\n    import denpex_kb.fleet\nexcept ImportError as e:\n    print(e)\nelse:\n    print('imported')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "denpex-kb[fleet]" in out.stdout and "pyarrow" in out.stdout


# ---------------------------------------------------------------------------------------------------------------
# The index pickles


def _report_key(report: Any) -> str:
    return json.dumps(report.to_dict(), sort_keys=True, default=str)


def test_a_used_index_pickles_and_gives_the_same_results(fleet_jobs: list[tuple[str, list[str]]]):
    index = denpex_kb.default_index()
    sample = fleet_jobs[:40]
    before = [_report_key(scan_many(paths, index=index)) for _, paths in sample]
    lines = [OOM, WATCHDOG, FAILED, "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275"]
    matched = [[(m.id, m.score, m.values) for m in denpex_kb.match(t, index=index)] for t in lines]
    assert index._always_set is not None or not index._always_anchors  # used: compiled engines exist
    assert any(s._regex is not None for s in index.signatures)
    data = pickle.dumps(index)
    copy = pickle.loads(data)
    assert copy is not index and copy.digest == index.digest
    assert copy._always_set is None and all(s._regex is None for s in copy.signatures)  # rebuilt lazily
    assert [_report_key(scan_many(paths, index=copy)) for _, paths in sample] == before
    assert [[(m.id, m.score, m.values) for m in denpex_kb.match(t, index=copy)] for t in lines] == matched
    assert copy.full_entries.keys() == index.full_entries.keys()
    assert pickle.loads(pickle.dumps(copy)).by_id == index.by_id  # and again, once used


def test_an_index_from_a_bundle_directory_carries_its_entries(tmp_path: Path):
    shipped = denpex_kb.default_index()  # the package's bundle, or the one DENPEX_KB_BUNDLE names
    src = Path(denpex_kb.__file__).parent / "data" if shipped.source == "package" else Path(shipped.source)
    bundle = tmp_path / "bundle"
    shutil.copytree(src, bundle)
    index = denpex_kb.load_bundle_dir(bundle)
    data = pickle.dumps(index)
    shutil.rmtree(bundle)  # as on an executor that has no such directory
    copy = pickle.loads(data)
    assert copy.full_entries.keys() == json.loads((src / "entries.json").read_text())["entries"].keys()
    report = scan([f"[rank3]: {OOM}"], index=copy)
    assert report.initiating.id == "cuda-out-of-memory" and report.entry is not None


# ---------------------------------------------------------------------------------------------------------------
# Generated fleet: scan_batch equals a plain loop of scan, and so does Spark


def test_generated_jobs_are_real_and_scan_batch_equals_scan(fleet_jobs: list[tuple[str, list[str]]]):
    assert len(fleet_jobs) >= 200
    kinds = Counter((len(paths) > 1, paths[0].endswith(".gz")) for _, paths in fleet_jobs)
    assert len(kinds) == 4  # per-rank groups and merged logs, plain and gzip
    batch = fleet.scan_batch([paths for _, paths in fleet_jobs], names=[name for name, _ in fleet_jobs])
    rows = batch.to_pylist()
    assert rows == plain_loop(fleet_jobs)
    for (name, paths), row in zip(fleet_jobs, rows, strict=True):
        report = scan_many(paths)
        assert row["job"] == name and row["files"] == sorted(paths)
        assert row["initiating_id"] == (report.initiating.id if report.initiating else None)
        assert row["initiating_line_number"] == (report.initiating.line_number if report.initiating else None)
        assert row["verdict_retry"] == (report.verdict.retry if report.verdict else None)
        assert row["collateral_count"] == len(report.collateral)
    found = Counter(r["initiating_id"] for r in rows)
    assert len(found) >= 40  # many different failures, not one line repeated
    assert sum(1 for r in rows if r["verdict_retry"] is None) >= len(rows) // 10  # the healthy jobs


def _java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


@pytest.fixture(scope="module")
def spark() -> Any:
    try:
        import pyspark  # noqa: F401
        from pyspark.sql import SparkSession
    except ImportError:
        _unavailable("pyspark is not installed: pip install pyspark")
    if _java() is None:
        _unavailable("no Java runtime for Spark: apt-get install -y openjdk-17-jre-headless")
    # The executors' Python must be this one (denpex-kb and its native wheels, RE2 and Hyperscan, are installed
    # here); on a cluster, PYSPARK_PYTHON points into a packed environment shipped with the job.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = (
        SparkSession.builder.master("local[2]").appName("denpex-kb-fleet-test")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "1g")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "16")  # several input batches per partition
        .config("spark.python.worker.reuse", "true")  # the default, relied on: one index per Python worker
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.mark.slow
def test_spark_map_in_arrow_equals_the_plain_loop(spark: Any, fleet_jobs: list[tuple[str, list[str]]]):
    expected = plain_loop(fleet_jobs)
    # Paths go to the executors, not the logs' bytes: binaryFile reads each file into one row, which fails
    # past 2 GB (a single Java byte array), and it cannot group a job's per-rank files into one row.
    rdd = spark.sparkContext.parallelize(fleet_jobs, 6)
    jobs_df = spark.createDataFrame(rdd, "job STRING, paths ARRAY<STRING>")
    out = fleet.scan_dataframe(jobs_df).cache()
    rows = sorted((r.asDict(recursive=True) for r in out.collect()), key=lambda r: r["job"])
    assert rows == sorted(expected, key=lambda r: r["job"])
    counts = {r["initiating_id"]: r["count"] for r in out.groupBy("initiating_id").count().collect()}
    assert counts == dict(Counter(r["initiating_id"] for r in expected))
    assert sum(counts.values()) == len(fleet_jobs) >= 200
    retry = {r["verdict_retry"]: r["count"] for r in out.groupBy("verdict_retry").count().collect()}
    assert retry == dict(Counter(r["verdict_retry"] for r in expected))
    # The schema Spark saw is the published one.
    assert out.columns == fleet.SCHEMA.names
    out.unpersist()
    # Every Python worker loaded the knowledge base once, however many tasks it ran. (A local function:
    # cloudpickle ships it by value, since the executors cannot import this test module.)

    def loads_probe(batches: Any) -> Any:
        for batch in batches:
            fleet.scan_batch([b"step 1 | loss 2.0\n"])
            n = batch.num_rows
            yield pa.RecordBatch.from_pydict({"pid": [os.getpid()] * n, "loads": [fleet.LOADS] * n})

    probe = spark.range(0, 64, numPartitions=8).mapInArrow(loads_probe, "pid BIGINT, loads BIGINT").collect()
    assert {r["loads"] for r in probe} == {1}  # (its speed is measured in benchmarks/fleet_bench.py, not here)


def test_scan_table_equals_the_plain_loop(fleet_jobs: list[tuple[str, list[str]]]):
    table = pa.table({"job": [j for j, _ in fleet_jobs[:20]], "paths": [p for _, p in fleet_jobs[:20]]})
    out = fleet.scan_table(table)
    assert out.schema == fleet.SCHEMA
    assert out.to_pylist() == plain_loop(fleet_jobs[:20])
    assert fleet.scan_table(table.slice(0, 0)).num_rows == 0


@pytest.mark.slow
def test_ray_map_batches_equals_the_plain_loop(fleet_jobs: list[tuple[str, list[str]]]):
    """The Ray Data recipe of the README, run for real on a local Ray (two CPUs)."""
    pytest.importorskip("ray.data", reason="Ray Data is not installed (.ci/run installs it)")
    import ray

    expected = sorted(plain_loop(fleet_jobs), key=lambda r: r["job"])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    try:
        ds = ray.data.from_items([{"job": job, "paths": paths} for job, paths in fleet_jobs])
        out = ds.map_batches(fleet.scan_table, batch_format="pyarrow", batch_size=32)
        rows = pa.concat_tables(ray.get(out.to_arrow_refs())).to_pylist()
    finally:
        ray.shutdown()
    assert sorted(rows, key=lambda r: r["job"]) == expected
    assert len(rows) == len(fleet_jobs) >= 200
