"""`denpex-kb scan`: read whole logs and report the initiating failure, its fix, and the fallout."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from ..cli import UsageError
from ..output import SCAN_FORMATS, ScanJob, ScanResult, ranges, render_scan
from ..scanner import ScanError, Source, scan_many  # light: no model, no loader
from ..terminal import visible
from ..verdict import EXIT_CODES, EXIT_HELP
from ._common import add_env_option, add_kb_option, env_versions, index

if TYPE_CHECKING:
    from ..bundle import KbIndex

ORDER = 20
__all__ = ["ranges", "register", "render", "run"]
render = render_scan  # the text report of one job; it lives with the other formats in denpex_kb.output
EXIT_STATUS = (
    "Exit status: 0 no failure found; 1 a failure found (in any job); 2 a usage error, or input that could not be "
    "read (a job none of whose files could be read; one unreadable file among several is reported, and the others "
    "are scanned). --exit-zero: 0 unless 2. --exit-by-verdict: the verdict's code."
)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("scan", help="find the initiating failure in training logs (plain, gzip, bzip2 or xz; '-' is stdin)",
                       epilog=EXIT_STATUS)
    p.add_argument("logs", nargs="*", metavar="LOG",
                   help="log files (with --each, also directories of per-rank files); '-' or nothing reads stdin")
    p.add_argument("--json", action="store_true", help="print the report as JSON (the same as --format json)")
    p.add_argument("--jsonl", action="store_true",
                   help="print one JSON record a line per job, with the columns of denpex_kb.fleet's schema and its "
                   "schema_version (the same as --format jsonl)")
    p.add_argument("--format", choices=SCAN_FORMATS.names, help=SCAN_FORMATS.describe())
    p.add_argument("--each", action="store_true",
                   help="every LOG is its own job (a directory: the files directly inside it, as one job); "
                   "without it, all the files are one job")
    p.add_argument("--job", metavar="NAME",
                   help="the job's name in --jsonl records and SARIF (e.g. a Slurm job id); default: its path")
    p.add_argument("--exit-zero", action="store_true",
                   help="exit 0 whatever was found; input that could not be read still exits 2")
    p.add_argument(
        "--exit-by-verdict", action="store_true",
        help=f"exit with the verdict's code for launchers and schedulers: {EXIT_HELP}; 2 stays a usage or I/O error",
    )
    p.add_argument(
        "--exclude-file", metavar="FILE",
        help="with a retry-elsewhere verdict, write the host names to exclude to FILE, one a line (an empty file "
        "otherwise), e.g. for `sbatch --exclude=$(paste -sd, FILE)`",
    )
    p.add_argument(
        "--fr", metavar="DIR", action="append",
        help="PyTorch flight-recorder dumps of the same job (a directory or a file; repeatable): the rank that never "
        "entered the collective the others waited in is shown with the report (see `denpex-kb hang`)",
    )
    add_kb_option(p, runtime=True)
    add_env_option(p)
    p.set_defaults(handler=run)


class Progress:
    """A progress bar on stderr, for big files when stderr is a terminal."""

    def __init__(self, total: int) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.shown = -1

    def __call__(self, n: int) -> None:
        self.done += n
        pct = min(100, self.done * 100 // self.total)
        if pct != self.shown:
            self.shown = pct
            bar = "#" * (pct // 4)
            sys.stderr.write(f"\rscanning [{bar:<25}] {pct:3d}%")
            sys.stderr.flush()

    def close(self) -> None:
        sys.stderr.write("\r" + " " * 40 + "\r")


def _format(args: argparse.Namespace) -> str:
    chosen = {name for name, given in (("json", args.json), ("jsonl", args.jsonl), (args.format, args.format)) if given}
    if len(chosen) > 1:
        raise UsageError(f"choose one output format, not {' and '.join(sorted(chosen))}")
    fmt = chosen.pop() if chosen else "text"
    if args.each:
        if fmt == "json":
            raise UsageError("--json prints the report of one job; with --each use --jsonl (one record a job) or --format sarif")
        for flag, given in (("--exit-by-verdict", args.exit_by_verdict), ("--exclude-file", args.exclude_file), ("--fr", args.fr),
                            ("--job", args.job)):
            if given:
                raise UsageError(f"{flag} acts on one job; it cannot be combined with --each")
    if args.exit_zero and args.exit_by_verdict:
        raise UsageError("--exit-zero and --exit-by-verdict cannot be combined")
    return fmt


def _job_name(paths: list[str]) -> str:
    """As denpex_kb.fleet names a job: its path, the directory its paths share, or '#0'."""
    if len(paths) == 1:
        return paths[0]
    try:
        common = os.path.commonpath(paths)
    except ValueError:  # absolute and relative paths mixed
        common = ""
    return common if common and common != os.sep else "#0"


def _jobs(logs: list[str], each: bool) -> list[tuple[str, list[str], str | None]]:
    """(name, files, why it cannot be read) per job."""
    if not each:
        return [(_job_name(logs), sorted(logs), None)]
    jobs: list[tuple[str, list[str], str | None]] = []
    for given in logs:
        if os.path.isdir(given):
            inside = sorted(e.path for e in os.scandir(given) if not e.name.startswith(".") and e.is_file())
            jobs.append((given, inside, None if inside else f"{given}: a directory with no log files in it"))
        else:
            jobs.append((given, [given], None))
    return jobs


def _scan_job(name: str, files: list[str], sources: list[Source], idx: KbIndex, versions: Mapping[str, str] | None,
              progress: Callable[[int], None] | None) -> ScanJob:
    try:
        return ScanJob(name, files, scan_many(sources, index=idx, progress=progress, versions=versions))
    except ScanError as exc:
        return ScanJob(name, files, None, [str(exc)])


def run(args: argparse.Namespace) -> int:
    fmt = _format(args)
    logs = args.logs or ["-"]
    if "" in logs:
        raise UsageError("an empty file name was given; give the log's path, or '-' for stdin")
    if "-" in logs and len(logs) > 1:
        raise UsageError("'-' (stdin) cannot be combined with files")
    idx = index(args)
    versions = env_versions(args)
    progress = None
    jobs: list[ScanJob] = []
    if logs == ["-"]:
        if sys.stdin is None or sys.stdin.closed:
            raise UsageError("stdin is closed; give a log file")
        jobs.append(_scan_job(args.job or "<stdin>", ["<stdin>"], [sys.stdin.buffer], idx, versions, None))
    else:
        planned = _jobs(logs, args.each)
        if args.job:
            planned = [(args.job, files, problem) for _, files, problem in planned]
        if sys.stderr.isatty():
            total = sum(os.path.getsize(p) for _, files, _ in planned for p in files if os.path.isfile(p))
            if total > 50 << 20:
                progress = Progress(total)
        try:
            for name, files, problem in planned:
                if problem:
                    jobs.append(ScanJob(name, files, None, [problem]))
                else:
                    jobs.append(_scan_job(name, files, list(files), idx, versions, progress))
        finally:
            if progress:
                progress.close()
    unread = [job for job in jobs if job.report is None]
    if unread and not args.each and fmt in ("text", "json"):
        raise UsageError(visible("; ".join(unread[0].errors)))  # nothing was read: no report to print
    if args.exclude_file:
        verdict = jobs[0].report.verdict if jobs[0].report is not None else None
        names = verdict.exclude if verdict is not None and verdict.retry == "elsewhere" else ()
        try:
            with open(args.exclude_file, "w", encoding="utf-8") as fh:
                fh.writelines(f"{name}\n" for name in names)
        except OSError as exc:
            raise UsageError(f"{visible(args.exclude_file)}: {exc.strerror}") from None
    if args.fr and jobs[0].report is not None:
        from .. import flight

        paths = flight.expand_paths(args.fr)
        missing = [str(p) for p in paths if not p.exists()]
        if missing or not paths:
            raise UsageError(f"--fr: no such dump file or directory: {visible(', '.join(missing or args.fr))}")
        with flight.paused_collector():
            dumps, problems = flight.read_dumps(paths)
            analysis = flight.analyze(dumps, problems=problems)
            jobs[0] = jobs[0]._replace(flight_lines=flight.fold_into_report(jobs[0].report, analysis),
                                       flight_doc=analysis.to_dict())
            del dumps, analysis  # released before the collector is back on (see paused_collector)
    SCAN_FORMATS.write(fmt, ScanResult(jobs, idx, headers=args.each))
    for job in jobs:
        for error in job.errors:
            print(f"denpex-kb scan: {visible(error)}", file=sys.stderr)
        if job.report is not None:
            # A file that could not be opened while the job's others were read: said on stderr too, where a
            # pipeline reading stdout does not look.
            skipped = [f for f in job.files if f not in job.report.files]
            for error in job.report.errors:
                if any(error.startswith(f"{f}:") for f in skipped):
                    print(f"denpex-kb scan: warning: {visible(error)}; the job's other files were scanned", file=sys.stderr)
    if unread:
        return 2
    reports = [job.report for job in jobs if job.report is not None]
    if args.exit_zero:
        return 0
    if args.exit_by_verdict:
        verdict = reports[0].verdict
        return EXIT_CODES["none"] if verdict is None else verdict.exit_code
    return 1 if any(r.initiating for r in reports) else 0
