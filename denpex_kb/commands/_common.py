"""Helpers shared by the subcommands."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ..cli import UsageError

if TYPE_CHECKING:  # the runtime path (match, scan) must not pay for the loader and the model
    from pathlib import Path

    from ..bundle import KbIndex
    from ..loader import KnowledgeBase
    from ..packs import Pack


def add_kb_option(parser: argparse.ArgumentParser, *, runtime: bool = False) -> None:
    if runtime:
        text = "use this knowledge-base directory (compiled in memory) instead of the bundle shipped in the package"
    else:
        text = "knowledge-base directory (default: ./kb, else the entry sources shipped in the package)"
    parser.add_argument("--kb", metavar="DIR", help=text)


def kb_dir(args: argparse.Namespace) -> Path:
    from ..paths import find_kb_dir

    path = find_kb_dir(getattr(args, "kb", None))
    if path is None:
        raise UsageError("no knowledge base found; pass --kb DIR")
    if not path.is_dir():
        raise UsageError(f"{path}: not a directory")
    return path


def load(args: argparse.Namespace, *, packs: bool = False) -> KnowledgeBase:
    """The knowledge base as YAML; with `packs`, the installed packs' entries too (see packs.py)."""
    from ..loader import load_kb

    found: list[Pack] = []
    if packs:
        from ..packs import discovered, stderr_warner

        found = discovered(stderr_warner(f"denpex-kb {args.command}"))
    return load_kb(kb_dir(args), found)


def index(args: argparse.Namespace) -> KbIndex:
    """The compiled index: the packaged bundle, or `--kb DIR` compiled in memory."""
    from ..bundle import default_index

    if getattr(args, "kb", None):
        import sys
        from pathlib import Path

        from ..compiler import index_from_kb, without_broken_files
        from ..loader import load_kb

        kb, skipped = without_broken_files(load_kb(Path(args.kb)))
        for path in skipped:
            print(f"denpex-kb {args.command}: warning: {path} left out: it has errors "
                  f"(`denpex-kb check --kb {args.kb}` lists them)", file=sys.stderr)
        if skipped and not kb.entries:
            raise UsageError(f"--kb {args.kb}: no entry file without errors")
        try:
            return index_from_kb(kb)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    return default_index()


def add_env_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--env", metavar="FILE",
        help="an environment report (python -m torch.utils.collect_env, ds_report, transformers env, accelerate env, "
             "nvidia-smi) whose versions are compared with each entry's affected versions",
    )


def env_versions(args: argparse.Namespace) -> dict[str, str] | None:
    """The versions `--env FILE` names (None without the option)."""
    path = getattr(args, "env", None)
    if path is None:
        return None
    from pathlib import Path

    from ..versions import read_versions

    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise UsageError(f"--env {path}: {exc.strerror or exc}") from None
    return read_versions(text.splitlines())


def did_you_mean(word: str, known: list[str], *, limit: int = 3) -> str:
    """'; did you mean a, b?' for the known names closest to a mistyped one ('' when none is close)."""
    from rapidfuzz import fuzz, process, utils

    # Plain edit-distance ratio: WRatio's partial matching calls every long id close to a short word.
    close = process.extract(word, known, scorer=fuzz.ratio, processor=utils.default_process, limit=limit, score_cutoff=60)
    best = close[0][1] if close else 0
    names = [name for name, score, _ in close if score >= best - 8]  # only the ones about as close as the best
    return f"; did you mean {' or '.join(names)}?" if names else ""


def shipped_kb(path: Path) -> bool:
    """Whether `path` is the copy of kb/ inside an installed package (no checkout around it to write into)."""
    from .. import paths

    try:
        return path.resolve() == paths.SHIPPED_KB_DIR.resolve()
    except OSError:
        return False
