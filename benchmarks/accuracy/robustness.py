"""How well `match` survives the way real lines reach it: every entry's own `examples.match`, each passed through
one pasting or logging artifact at a time, must still be named by the same entry first.

    python benchmarks/accuracy/robustness.py                # a table, one row per artifact
    python benchmarks/accuracy/robustness.py --show 5       # and up to 5 entries that lose examples, per artifact
    python benchmarks/accuracy/robustness.py --json

The held-out set measures unseen wordings; this measures the other half of "real lines vary": the same wording
behind a launcher's or a container runtime's prefix, in a markdown quote, in colour, with Windows line ends, or
hard-wrapped by a terminal. It uses only the knowledge base's own examples, so it may be used freely while
writing normalizers and signatures. Each artifact is a form the named software really produces; none of them
changes the words of the message. A measurement, not a unit test.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from denpex_kb.compiler import index_from_kb_dir  # noqa: E402
from denpex_kb.loader import load_kb  # noqa: E402
from denpex_kb.matcher import match  # noqa: E402


def _each_line(prefix: str) -> Callable[[str], str]:
    return lambda text: "\n".join(prefix + line for line in text.split("\n"))


def _terminal_wrap(text: str) -> str:
    """A terminal 100 columns wide, copied: each long line cut every 100 characters, inside words too."""
    return "\n".join("\n".join(line[i : i + 100] for i in range(0, len(line), 100)) or line
                     for line in text.split("\n"))


def _word_wrap(text: str) -> str:
    """An editor or a mail client wrapping at 80 columns: long lines broken at spaces, the space dropped."""
    return "\n".join("\n".join(textwrap.wrap(line, 80, break_long_words=False, break_on_hyphens=False)) or line
                     for line in text.split("\n"))


def _code_span(text: str) -> str:
    """A one-line message as Markdown inline code: the shortest backtick run the text does not hold, and a space
    inside each edge when the text starts or ends with a backtick (CommonMark's code spans)."""
    if "\n" in text:
        return text
    runs, ticks = set(re.findall(r"`+", text)), "`"
    while ticks in runs:
        ticks += "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


# name -> (what produces it, transformation). Prefixes are the exact shapes these programs print, and each can
# stand before any line a training job writes. (A Python logger's header is not among them: the shell's
# "Killed" or a signal's name never pass through a logger, and a logged message is not always the failure.)
ARTIFACTS: dict[str, tuple[str, Callable[[str], str]]] = {
    "torchrun-rank": ("torchrun --log-line-prefix / PyTorch's rank prefix", _each_line("[rank3]:")),
    "torchrun-tee": ("torchrun --tee 3 (local rank prefix)", _each_line("[default3]:")),
    "srun-label": ("srun --label", _each_line("3: ")),
    "deepspeed-launcher": ("deepspeed launcher (pdsh host prefix)", _each_line("worker-1: ")),
    "docker-compose": ("docker compose logs", _each_line("trainer-1  | ")),
    "kubectl-timestamps": ("kubectl logs --timestamps", _each_line("2024-05-01T12:00:00.123456789Z ")),
    "ray-worker": ("Ray's worker output prefix", _each_line("(RayTrainWorker pid=12345, ip=10.0.0.7) ")),
    "markdown-quote": ("a GitHub / chat quote", _each_line("> ")),
    "markdown-code": ("inline code in a chat message", _code_span),
    "ansi-colour": ("a coloured terminal (rich, colorlog, tqdm)", lambda t: f"\x1b[31m{t}\x1b[0m"),
    "crlf": ("Windows line ends", lambda t: t.replace("\n", "\r\n") + "\r\n"),
    "indented": ("a traceback or a code block's indent", _each_line("    ")),
    "terminal-wrap-100": ("a 100-column terminal, copied", _terminal_wrap),
    "word-wrap-80": ("an editor or mail client wrapping at 80 columns", _word_wrap),
}


def kb_examples(kb_dir: Path) -> list[tuple[str, str]]:
    """(entry id, example text) for every `examples.match` of every entry."""
    return [(entry.id, ex.text.rstrip("\n")) for entry in load_kb(kb_dir).entries.values()
            for ex in entry.examples.match]


def _first(text: str, index: object) -> str | None:
    found = match(text, top=1, index=index, fuzzy=True)  # type: ignore[arg-type]
    return found[0].id if found else None


def measure(kb_dir: Path) -> dict[str, object]:
    index = index_from_kb_dir(kb_dir)
    # Only examples the matcher names as written: an artifact can then only lose them.
    base = [(eid, text) for eid, text in kb_examples(kb_dir) if _first(text, index) == eid]
    rows: dict[str, dict[str, object]] = {}
    for name, (_, change) in ARTIFACTS.items():
        lost: Counter[str] = Counter()
        wrong: Counter[str] = Counter()
        changed = 0
        for eid, text in base:
            pasted = change(text)
            if pasted == text:
                continue
            changed += 1
            got = _first(pasted, index)
            if got is None:
                lost[eid] += 1
            elif got != eid:
                wrong[eid] += 1
        kept = changed - sum(lost.values()) - sum(wrong.values())
        rows[name] = {"examples": changed, "kept": kept, "lost": sum(lost.values()), "wrong": sum(wrong.values()),
                      "lost_by_entry": dict(lost.most_common()), "wrong_by_entry": dict(wrong.most_common())}
    return {"examples_named_as_written": len(base), "artifacts": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kb", type=Path, default=ROOT / "kb")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--show", type=int, default=0, help="entries losing the most examples, per artifact")
    args = parser.parse_args()
    got = measure(args.kb)
    if args.json:
        print(json.dumps(got, indent=2))
        return
    rows = got["artifacts"]
    assert isinstance(rows, dict)
    print(f"{got['examples_named_as_written']} examples named right as written; each artifact applied alone")
    print(f"  {'artifact':20s} {'examples':>8s} {'kept':>13s} {'lost':>6s} {'wrong':>6s}  produced by")
    by_entry: dict[str, int] = defaultdict(int)
    for name, row in rows.items():
        n = max(int(row["examples"]), 1)
        print(f"  {name:20s} {row['examples']:8d} {row['kept']:6d} ({100 * int(row['kept']) / n:5.1f}%)"
              f" {row['lost']:6d} {row['wrong']:6d}  {ARTIFACTS[name][0]}")
        for eid, k in {**row["lost_by_entry"], **row["wrong_by_entry"]}.items():
            by_entry[eid] += k
        if args.show:
            worst = list({**row["lost_by_entry"], **row["wrong_by_entry"]}.items())[: args.show]
            if worst:
                print("      " + ", ".join(f"{e} {k}" for e, k in worst))
    if by_entry:
        print("entries losing the most, all artifacts: "
              + ", ".join(f"{e} {k}" for e, k in sorted(by_entry.items(), key=lambda x: -x[1])[:10]))


if __name__ == "__main__":
    main()
