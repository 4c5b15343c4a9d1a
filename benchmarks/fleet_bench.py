"""Fleet triage throughput per core: a plain loop of `scan_many`, `fleet.scan_batch`, and Spark `local[2]`
(`mapInArrow` over paths), on the same generated jobs, printed side by side.

    pip install '.[fleet]' pyspark 'pandas<3'     # Spark also needs a Java 17+ runtime
    python benchmarks/fleet_bench.py               # 400 jobs, about a minute
    python benchmarks/fleet_bench.py --jobs 1000 --lines-per-rank 400 --no-spark

A measurement, not a test: nothing fails on a slow machine. The jobs are those of tests/test_fleet.py (real lines
from the knowledge base's examples and the benign corpus, per-rank groups and merged logs, plain and gzip).
Per core: the loop and scan_batch run in one process (one core; the scanner's reader thread overlaps I/O with
matching), Spark runs two executor cores, so its figure is divided by two. Spark's session start and the first
pass (Python workers starting, each loading the knowledge base once) are reported apart and not counted.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _line(name: str, cores: int, jobs: int, mb: float, wall: float, cpu: float | None) -> dict[str, Any]:
    return {"mode": name, "cores": cores, "jobs": jobs, "MB": round(mb, 1), "wall_s": round(wall, 3),
            "cpu_s": None if cpu is None else round(cpu, 3), "jobs_per_s": round(jobs / wall, 1),
            "jobs_per_s_per_core": round(jobs / wall / cores, 1), "MB_per_s_per_core": round(mb / wall / cores, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=400)
    ap.add_argument("--lines-per-rank", type=int, default=200)
    ap.add_argument("--batch", type=int, default=64, help="jobs per scan_batch call")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--no-spark", action="store_true")
    ap.add_argument("--json", action="store_true", help="print the results as JSON too")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="denpex-fleet-bench-"))
    try:
        return _run(args, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _run(args: argparse.Namespace, root: Path) -> int:

    from test_fleet import make_jobs

    import denpex_kb
    from denpex_kb import fleet

    t = time.perf_counter()
    jobs = make_jobs(root, args.jobs, lines_per_rank=args.lines_per_rank)
    size = sum(os.path.getsize(p) for _, paths in jobs for p in paths)
    raw = sum(len(gzip.decompress(Path(p).read_bytes()) if p.endswith(".gz") else Path(p).read_bytes())
              for _, paths in jobs for p in paths)  # the text scanned
    mb = raw / 1e6
    print(f"{len(jobs)} jobs, {sum(len(p) for _, p in jobs)} files, {size / 1e6:.1f} MB on disk, {mb:.1f} MB of text "
          f"(made in {time.perf_counter() - t:.1f} s under {root})", file=sys.stderr)
    fleet.shared_index()  # loaded and compiled before any timing, as in a long-lived worker
    fleet.scan_batch([jobs[0][1]])
    results = []

    t, c = time.perf_counter(), _cpu()
    loop_rows = [fleet.record(denpex_kb.scan_many(paths), name, sorted(paths)) for name, paths in jobs]
    results.append(_line("plain loop (scan_many)", 1, len(jobs), mb, time.perf_counter() - t, _cpu() - c))

    t, c = time.perf_counter(), _cpu()
    batch_rows: list[dict[str, Any]] = []
    for start in range(0, len(jobs), args.batch):
        part = jobs[start : start + args.batch]
        batch_rows += fleet.scan_batch([p for _, p in part], names=[n for n, _ in part]).to_pylist()
    results.append(_line(f"scan_batch ({args.batch} a call)", 1, len(jobs), mb, time.perf_counter() - t, _cpu() - c))
    if batch_rows != loop_rows:
        print("warning: scan_batch rows differ from the plain loop's", file=sys.stderr)

    if not args.no_spark:
        try:
            from pyspark.sql import SparkSession
        except ImportError:
            print("pyspark is not installed: Spark not measured", file=sys.stderr)
        else:
            os.environ["PYSPARK_PYTHON"] = sys.executable
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            t = time.perf_counter()
            spark = (SparkSession.builder.master("local[2]").appName("denpex-kb-fleet-bench")
                     .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                     .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
                     .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(args.batch)).getOrCreate())
            spark.sparkContext.setLogLevel("ERROR")
            started = time.perf_counter() - t

            def run() -> list[Any]:
                df = spark.createDataFrame(spark.sparkContext.parallelize(jobs, args.partitions),
                                           "job STRING, paths ARRAY<STRING>")
                return fleet.scan_dataframe(df).collect()

            t = time.perf_counter()
            run()  # Python workers start and load the knowledge base: once per worker
            warm = time.perf_counter() - t
            t = time.perf_counter()
            rows = run()
            results.append(_line("Spark local[2] mapInArrow", 2, len(jobs), mb, time.perf_counter() - t, None))
            spark_rows = sorted((r.asDict(recursive=True) for r in rows), key=lambda r: r["job"])
            if spark_rows != sorted(loop_rows, key=lambda r: r["job"]):
                print("warning: Spark rows differ from the plain loop's", file=sys.stderr)
            print(f"Spark: session start {started:.1f} s, first pass (workers start, index loaded) {warm:.1f} s; "
                  "neither is counted below", file=sys.stderr)
            spark.stop()

    head = f"{'mode':<28} {'cores':>5} {'wall s':>8} {'cpu s':>7} {'jobs/s':>8} {'jobs/s/core':>12} {'MB/s/core':>10}"
    print(head)
    print("-" * len(head))
    for r in results:
        cpu = "" if r["cpu_s"] is None else f"{r['cpu_s']:.2f}"
        print(f"{r['mode']:<28} {r['cores']:>5} {r['wall_s']:>8.2f} {cpu:>7} {r['jobs_per_s']:>8.1f} "
              f"{r['jobs_per_s_per_core']:>12.1f} {r['MB_per_s_per_core']:>10.1f}")
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
