"""`denpex-kb scan`: read whole logs and report the initiating failure, its fix, and the fallout."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict

from ..cli import UsageError
from ..scanner import Finding, ScanError, ScanReport, Source, scan_many  # light: no model, no loader
from ..terminal import json_safe, visible
from ..verdict import EXIT_CODES, EXIT_HELP
from ._common import add_kb_option, index

ORDER = 20


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("scan", help="find the initiating failure in training logs (plain, gzip, bzip2 or xz; '-' is stdin)")
    p.add_argument("logs", nargs="*", metavar="LOG", help="log files; '-' or nothing reads stdin")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
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
    p.set_defaults(handler=run)


def ranges(ranks: list[int]) -> str:
    """[0, 1, 2, 4, 5] -> '0-2,4-5'"""
    runs: list[list[int]] = []  # [first, last] of each run of consecutive ranks
    for r in sorted(set(ranks)):
        if runs and runs[-1][1] == r - 1:
            runs[-1][1] = r
        else:
            runs.append([r, r])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


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


def _where(f: Finding) -> str:
    who = f"rank {f.rank}" if f.rank is not None else "no rank prefix"
    place = f"{visible(f.file)}:{f.line}" if f.file else f"line {f.line}"
    return f"{who}, {place}"


def render(report: ScanReport) -> str:
    out: list[str] = []
    init = report.initiating
    if report.verdict is not None:
        out.append(visible(report.verdict.headline()))
        out.extend(f"  (not acted on: {visible(line)})" for line in report.verdict.stale)
        out.append("")
    if init is None:
        out.append(f"No failure found in {report.lines} lines.")
    else:
        name = f"{init.id}: {init.title}" if init.id else f"unrecognised {init.exception or 'exception'} (no entry knows it yet)"
        out.append(f"Initiating failure  {visible(name)}")
        out.append(f"  at   {_where(init)}")
        out.append(f"  line {visible(init.text[:400])}")
        info = report.info
        if info:
            out.append(f"\nFix   {visible(info.fix)}")
            out.extend(f"Verify  {visible(run)}" for run in info.verify)
            out.append(f"More  {visible(info.url)}  (or: denpex-kb explain {visible(info.id)})")
        elif init.id is None:
            out.append("\nThis is the first exception in the log. If it is a failure others will meet, report it:")
            out.append("  https://github.com/denpex-kb/denpex-kb/issues/new?template=missing-failure.yml")
    for err in report.errors:
        out.append(f"Warning  {visible(err)}")
    for hint in report.hints:
        out.append(f"Note  {visible(hint)}")
    collateral = report.collateral
    if collateral:
        grouped: dict[str, list[Finding]] = defaultdict(list)
        for f in collateral:
            grouped[f.id or f"unrecognised {f.exception}"].append(f)
        out.append(f"\nCollateral ({len(collateral)} findings)")
        for key, fs in grouped.items():
            ranks = [r for f in fs for r in f.ranks]
            who = f"ranks {ranges(ranks)}" if len(set(ranks)) > 1 else (f"rank {ranks[0]}" if ranks else "")
            lines = sum(f.count for f in fs)
            first = min(fs, key=lambda f: f.order)
            where = f"first at {visible(first.file) + ':' if first.file else 'line '}{first.line}"
            out.append(f"  {who + ': ' if who else ''}{visible(key)} ({lines} line{'s' if lines != 1 else ''}, {where})")
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    logs = args.logs or ["-"]
    if "-" in logs and len(logs) > 1:
        raise UsageError("'-' (stdin) cannot be combined with files")
    idx = index(args)
    progress = None
    sources: list[Source] = []
    if logs == ["-"]:
        if sys.stdin is None or sys.stdin.closed:
            raise UsageError("stdin is closed; give a log file")
        sources = [sys.stdin.buffer]
    else:
        sources = list(logs)
        if sys.stderr.isatty():
            total = sum(os.path.getsize(p) for p in logs if os.path.isfile(p))
            if total > 50 << 20:
                progress = Progress(total)
    try:
        report = scan_many(sources, index=idx, progress=progress)
    except ScanError as exc:
        raise UsageError(visible(exc)) from None
    finally:
        if progress:
            progress.close()
    verdict = report.verdict
    if args.exclude_file:
        names = verdict.exclude if verdict is not None and verdict.retry == "elsewhere" else ()
        try:
            with open(args.exclude_file, "w", encoding="utf-8") as fh:
                fh.writelines(f"{name}\n" for name in names)
        except OSError as exc:
            raise UsageError(f"{visible(args.exclude_file)}: {exc.strerror}") from None
    hang_lines: list[str] = []
    hang_doc = None
    if args.fr:
        from .. import flight

        paths = flight.expand_paths(args.fr)
        missing = [str(p) for p in paths if not p.exists()]
        if missing or not paths:
            raise UsageError(f"--fr: no such dump file or directory: {visible(', '.join(missing or args.fr))}")
        dumps, problems = flight.read_dumps(paths)
        analysis = flight.analyze(dumps, problems=problems)
        hang_lines = flight.fold_into_report(report, analysis)
        hang_doc = analysis.to_dict()
    if args.json:
        doc = report.to_dict()
        if hang_doc is not None:
            doc["flight_recorder"] = hang_doc
        print(json_safe(json.dumps(doc, indent=2, ensure_ascii=False, default=str)))
    else:
        print(render(report))
        if hang_lines:
            print()
            print("\n".join(visible(line) for line in hang_lines))
    if args.exit_by_verdict:
        return EXIT_CODES["none"] if verdict is None else verdict.exit_code
    return 1 if report.initiating else 0
