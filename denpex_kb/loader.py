"""Loading `kb/`: every file parsed and validated, every problem collected with its file, line and column."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from .model import Entry, Tombstone
from .problems import Problem
from .yamlio import YamlProblem, load_file, position, to_plain

if TYPE_CHECKING:
    from collections.abc import Iterable

    from .packs import Pack

TAGS_FILE = "_tags.yaml"
SCHEMA_LINE = "# yaml-language-server: $schema=../schema/entry.schema.json"


@dataclass
class Loaded:
    """One entry file, parsed: the model plus the document it came from (for positions)."""

    path: Path
    display: str
    entry: Entry | Tombstone
    doc: Any

    def where(self, *loc: Any) -> tuple[int, int]:
        return position(self.doc, loc)


@dataclass
class KnowledgeBase:
    root: Path
    entries: dict[str, Entry] = field(default_factory=dict)
    tombstones: dict[str, Tombstone] = field(default_factory=dict)
    files: dict[str, Loaded] = field(default_factory=dict)  # id -> file
    tags: dict[str, dict[str, str]] = field(default_factory=dict)  # group -> tag -> description
    problems: list[Problem] = field(default_factory=list)
    packs: dict[str, str] = field(default_factory=dict)  # id -> the installed pack it comes from (none: kb/ itself)
    read: list[str] = field(default_factory=list)  # every entry file read, as displayed; `files`: those that loaded

    @property
    def tag_group(self) -> dict[str, str]:
        return {tag: group for group, tags in self.tags.items() for tag in tags}


def display_path(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


_HINTS = {
    "missing": "add it; `denpex-kb schema` lists every field",
    "extra_forbidden": "remove it or fix its spelling; `denpex-kb schema` lists the allowed fields",
    "enum": "use one of the listed values",
    "literal_error": "use one of the listed values",
    "string_pattern_mismatch": "ids are kebab-case: lowercase letters, digits and single hyphens",
    "too_short": "add at least the minimum number of items",
    "string_too_short": "write more",
    "string_too_long": "shorten it",
}


def _schema_problem(display: str, doc: Any, err: dict[str, Any], kind: str) -> Problem:
    loc = tuple(err.get("loc", ()))
    line, col = position(doc, loc, at_key=err.get("type") == "extra_forbidden")
    dotted = ".".join(str(p) for p in loc) or "(entry)"
    msg = err.get("msg", "invalid")
    hint = _HINTS.get(err.get("type", ""), "")
    text = f"{dotted}: {msg}" + (f"; {hint}" if hint else "")
    return Problem.of("DKB003", display, line, col, f"{text} ({kind})" if kind == "tombstone" else text)


def _load_tags(root: Path, kb: KnowledgeBase, *, required: bool = True) -> None:
    path = root / TAGS_FILE
    display = display_path(path)
    if not path.is_file():
        if required:
            kb.problems.append(Problem.of("DKB010", display, 0, 0, "the tag vocabulary is missing; create kb/_tags.yaml"))
        return
    try:
        doc = to_plain(load_file(path))
    except YamlProblem as exc:
        kb.problems.append(Problem.of(exc.code, display, exc.line, exc.col, str(exc)))
        return
    if not isinstance(doc, dict) or not all(isinstance(v, dict) for v in doc.values()):
        kb.problems.append(
            Problem.of("DKB010", display, 1, 1, "the vocabulary must map each group to a mapping of tag: description")
        )
        return
    for group, tags in doc.items():  # a pack's vocabulary adds to the knowledge base's
        kb.tags.setdefault(str(group), {}).update({str(t): str(d) for t, d in tags.items()})


def load_entry_file(path: Path, root: Path) -> tuple[Loaded | None, list[Problem]]:
    display = display_path(path)
    problems: list[Problem] = []
    if path.is_symlink() or root.resolve() not in path.resolve().parents:
        return None, [Problem.of("DKB005", display, 0, 0, "entry files must be regular files inside kb/, not links")]
    try:
        doc = load_file(path)
    except YamlProblem as exc:
        return None, [Problem.of(exc.code, display, exc.line, exc.col, str(exc))]
    except OSError as exc:
        return None, [Problem.of("DKB001", display, 0, 0, f"cannot read the file: {exc.strerror}")]
    if not isinstance(doc, dict):
        return None, [Problem.of("DKB003", display, 1, 1, "an entry must be a YAML mapping of fields")]
    data = to_plain(doc)
    is_tombstone = data.get("status") == "removed"
    model = Tombstone if is_tombstone else Entry
    try:
        entry = model.model_validate(data)
    except ValidationError as exc:
        kind = "tombstone" if is_tombstone else "entry"
        problems.extend(_schema_problem(display, doc, e, kind) for e in exc.errors())  # type: ignore[arg-type]
        return None, problems
    except RecursionError:
        return None, [Problem.of("DKB003", display, 1, 1, "the entry nests too deeply")]
    return Loaded(path, display, entry, doc), problems


def _add_entries(kb: KnowledgeBase, root: Path, paths: Iterable[Path], pack: str | None = None) -> None:
    for path in paths:
        kb.read.append(display_path(path))
        loaded, problems = load_entry_file(path, root)
        kb.problems.extend(problems)
        if loaded is None:
            continue
        entry_id = loaded.entry.id
        if entry_id in kb.files:
            first = kb.files[entry_id].display
            line, col = loaded.where("id")
            kb.problems.append(
                Problem.of("DKB101", loaded.display, line, col, f"id {entry_id!r} is already used by {first}; ids are never reused, pick a new one")
            )
            continue
        kb.files[entry_id] = loaded
        if pack is not None:
            kb.packs[entry_id] = pack
        if isinstance(loaded.entry, Tombstone):
            kb.tombstones[entry_id] = loaded.entry
        else:
            kb.entries[entry_id] = loaded.entry


def _entry_files(root: Path) -> list[Path]:
    return [p for p in sorted(root.glob("*.yaml")) if not p.name.startswith("_")]  # `_` files support the rest


def load_kb(root: Path | str, packs: Iterable[Pack] = ()) -> KnowledgeBase:
    """Parse and validate every `*.yaml` in `root`, then the entries of the given installed packs (so that
    `check` holds them to the same rules and sees their ids and links next to the knowledge base's)."""
    root = Path(root)
    kb = KnowledgeBase(root=root)
    if not root.is_dir():
        kb.problems.append(Problem.of("DKB000", display_path(root), 0, 0, "no such knowledge-base directory"))
        return kb
    _load_tags(root, kb)
    _add_entries(kb, root, _entry_files(root))
    for pack in packs:
        _load_tags(pack.root, kb, required=False)
        _add_entries(kb, pack.root, _entry_files(pack.root), pack.name)
    return kb


def load_pack_entries(pack: Pack) -> KnowledgeBase:
    """One pack's entries alone, for compiling it at run time (the cross-entry checks are `check`'s job)."""
    kb = KnowledgeBase(root=pack.root)
    _load_tags(pack.root, kb, required=False)
    _add_entries(kb, pack.root, _entry_files(pack.root), pack.name)
    return kb
