"""Canonical formatting of entry files, lossless for data and comments.

Two passes. ruamel.yaml's round trip sets the layout (2-space mappings, `- ` items indented under their key,
no re-wrapping, multi-line strings as `|` blocks) and keeps every comment where it was, as long as the
structure does not change. Putting keys in the model's order does change the structure, and ruamel files a
comment written above a key under the *previous* key's value, so moving keys in ruamel would move comments
to the wrong place. Block mappings are therefore reordered as text: each key carries its own lines and the
comment lines directly above it. The result is parsed again and compared with the input before anything is
written: a formatting that would change a value or drop a comment is refused, never written.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import tempfile
import types
import typing
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedBase, CommentedMap, CommentedSeq
from ruamel.yaml.events import ScalarEvent
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, FoldedScalarString, LiteralScalarString

from .errors import LocatedError
from .loader import SCHEMA_LINE
from .model import Entry, Tombstone
from .yamlio import MAX_FILE_BYTES, YamlProblem, decode, load_text, to_plain

WIDTH = 1_000_000  # never re-wrap: long log lines must stay one line, as the software printed them
_MAX_REORDERS = 1_000  # each pass fixes one mapping; an entry has a few dozen


class FormatError(LocatedError):
    """The file cannot be formatted; `line` and `col` are 1-based."""


# --- the canonical key order, read from the model ------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    """Key order of one mapping and the shapes of its nested mappings (by key)."""

    order: tuple[str, ...]
    children: dict[str, Shape]


def _submodel(annotation: Any) -> type[BaseModel] | None:
    """The model class a field holds, directly, optionally or as list items; None for anything else."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType, list, typing.Annotated):
        for arg in typing.get_args(annotation):
            found = _submodel(arg)
            if found is not None:
                return found
    return None


def shape_of(model: type[BaseModel]) -> Shape:
    children = {}
    for name, info in model.model_fields.items():
        sub = _submodel(info.annotation)
        if sub is not None:
            children[name] = shape_of(sub)
    return Shape(tuple(model.model_fields), children)


ENTRY_SHAPE = shape_of(Entry)
TOMBSTONE_SHAPE = shape_of(Tombstone)


def _canonical(keys: list[Any], order: tuple[str, ...]) -> list[Any]:
    """Known keys in model order, then unknown ones as they were (`check` reports those)."""
    rank = {k: i for i, k in enumerate(order)}
    return sorted(keys, key=lambda k: (0, rank[k]) if k in rank else (1, keys.index(k)))


def _mappings(node: Any, shape: Shape) -> list[tuple[CommentedMap, Shape]]:
    """Every mapping of the document that has a model order, outermost first, in document order."""
    found: list[tuple[CommentedMap, Shape]] = []
    if isinstance(node, CommentedMap):
        found.append((node, shape))
        for key, value in node.items():
            child = shape.children.get(key)
            if child is None:
                continue
            for item in value if isinstance(value, CommentedSeq) else [value]:
                found.extend(_mappings(item, child))
    return found


# --- pass 1: layout and scalar styles, through ruamel ----------------------------------------------------


def _yaml() -> YAML:
    y = YAML(typ="rt", pure=True)
    y.preserve_quotes = True  # keep the author's quoting; only the layout is canonical
    y.indent(mapping=2, sequence=4, offset=2)
    y.width = WIDTH
    y.allow_duplicate_keys = False
    return y


# Characters a `|` block cannot hold as themselves: YAML reads them as line breaks, or they are not printable.
_UNICODE_BREAKS = re.compile("[\x85\u2028\u2029]")
_NOT_IN_BLOCKS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]")
# Characters ruamel counts as printable and would write raw although nobody can see them: bidi embeddings,
# overrides, isolates and marks (Trojan Source), zero-width characters. Values holding one are written double
# quoted with the character as a `\uXXXX` escape, the way an author writes it on purpose.
_INVISIBLE = re.compile("[\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069]")


def _block_safe(value: str) -> bool:
    """Whether a plain `|` or `|-` block holds `value` exactly. Values needing indentation or keep indicators
    (leading blanks, only newlines, several trailing newlines, trailing spaces) stay quoted: ruamel's emitter
    gets some of those wrong, and a reader would not see the difference anyway."""
    lines = value.split("\n")
    return (
        not _NOT_IN_BLOCKS.search(value)
        and bool(value.strip())
        and value[:1] not in (" ", "\t", "\n")
        and not value.endswith("\n\n")
        and all(line == line.rstrip() for line in lines)
    )


def _literal_blocks(node: Any) -> None:
    """Multi-line strings become `|` blocks where a block holds them exactly; Unicode line breaks get escaped."""
    if isinstance(node, CommentedMap):
        items: Any = list(node.items())
    elif isinstance(node, CommentedSeq):
        items = list(enumerate(node))
    else:
        return
    for key, value in items:
        if isinstance(value, str) and (_UNICODE_BREAKS.search(value) or _INVISIBLE.search(value)):
            # Written raw, YAML readers count these as line breaks; escaped (\L, \P, \N) they stay text.
            node[key] = DoubleQuotedScalarString(value)
        elif isinstance(value, str) and "\n" in value and _block_safe(value) and not isinstance(value, (LiteralScalarString, FoldedScalarString)):
            node[key] = LiteralScalarString(value)
        else:
            _literal_blocks(value)


def _is_flow(node: CommentedBase) -> bool:
    return bool(node.fa.flow_style())


def _layout(text: str) -> str:
    y = _yaml()
    doc = y.load(text)
    if not isinstance(doc, CommentedMap):
        raise FormatError("an entry must be a YAML mapping of fields")
    for mapping, shape in _mappings(doc, _shape_for(doc)):
        # A flow mapping (`{id: x, relation: sibling}`) holds no comments inside, so it is reordered in place.
        if _is_flow(mapping):
            for key in _canonical(list(mapping), shape.order):
                mapping.move_to_end(key)
    _literal_blocks(doc)
    out = io.StringIO()
    y.dump(doc, out)
    return _escape_invisible(out.getvalue(), text)


def _escape_invisible(text: str, original: str) -> str:
    """Inside double-quoted scalars, write each invisible character as its `\\uXXXX` escape (same value), in the
    spelling the original file used for it (`\\u202e` stays `\\u202e`)."""
    if not _INVISIBLE.search(text):
        return text
    written = {m.group().lower(): m.group() for m in re.finditer(r"\\u[0-9a-fA-F]{4}", original)}

    def escape(m: re.Match[str]) -> str:
        code = f"\\u{ord(m.group()):04x}"
        return written.get(code, code.upper().replace("\\U", "\\u"))

    spans = [
        (e.start_mark.index, e.end_mark.index)
        for e in _yaml().parse(io.StringIO(text))
        if isinstance(e, ScalarEvent) and e.style == '"'
    ]
    for start, end in reversed(spans):
        inner = _INVISIBLE.sub(escape, text[start:end])
        text = text[:start] + inner + text[end:]
    return text


def _shape_for(doc: CommentedMap) -> Shape:
    return TOMBSTONE_SHAPE if doc.get("status") == "removed" else ENTRY_SHAPE


# --- pass 2: key order, as text ----------------------------------------------------------------------------


# Line breaks as ruamel numbers lines: \n and a lone \r. str.splitlines also breaks on \x85, \u2028 and others.
_BREAK = re.compile("(?<=\n)|(?<=\r)(?!\n)")


def _lines(text: str) -> list[str]:
    """The lines of `text`, numbered as ruamel numbers them, each with its line break."""
    parts = _BREAK.split(text)
    return parts[:-1] if parts and parts[-1] == "" else parts


def _scalar_lines(text: str) -> set[int]:
    """0-based lines inside multi-line scalars (block, quoted or plain): their `#` lines are text, not comments."""
    inside: set[int] = set()
    for event in _yaml().parse(io.StringIO(text)):
        if isinstance(event, ScalarEvent):
            start, end = event.start_mark.line, event.end_mark.line
            last = end if event.end_mark.column > 0 else end - 1
            inside.update(range(start + 1, last + 1))
    return inside


def _reorder_one(text: str) -> str | None:
    """Put the keys of the first out-of-order block mapping in order; None when every mapping is in order."""
    doc = _yaml().load(text)
    lines = _lines(text)
    scalar = _scalar_lines(text)

    def loose(n: int) -> bool:  # a comment or blank line that is not part of a scalar
        return n not in scalar and (not lines[n].strip() or lines[n].lstrip().startswith("#"))

    for mapping, shape in _mappings(doc, _shape_for(doc)):
        keys = list(mapping)
        wanted = _canonical(keys, shape.order)
        if keys == wanted or _is_flow(mapping):
            continue
        starts = [mapping.lc.key(k)[0] for k in keys]
        col = mapping.lc.key(keys[0])[1]
        # The mapping ends at the first later line indented no deeper than its keys; comment lines just before
        # that belong to what follows.
        end = len(lines)
        for n in range(starts[-1] + 1, len(lines)):
            if n not in scalar and not loose(n) and len(lines[n]) - len(lines[n].lstrip(" ")) <= col:
                end = n
                break
        while end - 1 > starts[-1] and loose(end - 1):
            end -= 1
        # Each key's chunk starts at the comment lines directly above it. Above the first key, a blank line or
        # the schema line ends them: what comes before is the file's header and stays on top. Comments above a
        # `- ` line belong to the whole item and stay there.
        first_start = starts[0]
        in_item = bool(lines[starts[0]][:col].strip())
        while (
            not in_item
            and first_start > 0
            and first_start - 1 not in scalar
            and lines[first_start - 1].lstrip().startswith("#")
            and not lines[first_start - 1].startswith(SCHEMA_LINE)
        ):
            first_start -= 1
        bounds = [first_start]
        for i in range(1, len(keys)):
            s = starts[i]
            while s - 1 > starts[i - 1] and loose(s - 1):
                s -= 1
            bounds.append(s)
        bounds.append(end)
        chunks = {k: lines[bounds[i] : bounds[i + 1]] for i, k in enumerate(keys)}
        # The first key of a sequence item shares its line with `- `: the dash goes to whichever key is first.
        prefix = lines[starts[0]][:col]
        first = chunks[keys[0]]
        at = starts[0] - first_start
        chunks[keys[0]] = [*first[:at], " " * col + first[at][col:], *first[at + 1 :]]
        head = chunks[wanted[0]]
        lead = 0
        while lead < len(head) and (not head[lead].strip() or head[lead].lstrip().startswith("#")):
            lead += 1
        chunks[wanted[0]] = [*head[:lead], prefix + head[lead][col:], *head[lead + 1 :]]
        body = [line for k in wanted for line in chunks[k]]
        return "".join(lines[:first_start] + body + lines[end:])
    return None


# --- checks and the whole pipeline --------------------------------------------------------------------------


def _scalar_spans(text: str) -> dict[int, list[tuple[int, int]]]:
    """Per 0-based line, the column ranges covered by scalars (keys and values)."""
    spans: dict[int, list[tuple[int, int]]] = {}
    for event in _yaml().parse(io.StringIO(text)):
        if not isinstance(event, ScalarEvent):
            continue
        (l0, c0), (l1, c1) = (event.start_mark.line, event.start_mark.column), (event.end_mark.line, event.end_mark.column)
        if l0 == l1:
            spans.setdefault(l0, []).append((c0, c1))
            continue
        spans.setdefault(l0, []).append((c0, 1 << 30))
        for n in range(l0 + 1, l1):
            spans.setdefault(n, []).append((0, 1 << 30))
        spans.setdefault(l1, []).append((0, c1))
    return spans


def _comments(text: str) -> Counter[str]:
    """Every comment of the document, full-line or after a value, as text (a `#` inside a scalar is not one)."""
    spans = _scalar_spans(text)
    found: Counter[str] = Counter()
    for n, line in enumerate(_lines(text)):
        line = line.rstrip("\r\n\x85\u2028\u2029")
        covered = spans.get(n, [])
        for m in re.finditer("#", line):
            col = m.start()
            if (col == 0 or line[col - 1] in " \t") and not any(a <= col < b for a, b in covered):
                found[line[col:].rstrip()] += 1
                break
    return found


def format_text(text: str) -> str:
    """The canonical form of an entry file's text. Raises YamlProblem or FormatError; never loses data."""
    before = load_text(text)  # the loader's own safety checks and error positions
    if not isinstance(before, CommentedMap):
        raise FormatError("an entry must be a YAML mapping of fields")
    out = _layout(text)
    for _ in range(_MAX_REORDERS):
        nxt = _reorder_one(out)
        if nxt is None:
            break
        out = nxt
    else:  # pragma: no cover - a bug, not a user error
        raise FormatError("the keys could not be put in order; please report this file")
    try:
        after = load_text(out)
    except YamlProblem as exc:  # pragma: no cover - a formatter bug; the file is left as it was
        raise FormatError(f"formatting produced invalid YAML ({exc}); the file was left unchanged") from None
    if to_plain(after) != to_plain(before):
        raise FormatError("formatting would change a value; the file was left unchanged (please report it)")
    lost = _comments(text) - _comments(out)
    if lost:
        raise FormatError(f"formatting would drop the comment {next(iter(lost))!r}; move it above a key and retry")
    return out


def read_text(path: Path) -> str:
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise YamlProblem(f"the file is {size} bytes; entries must be under {MAX_FILE_BYTES} bytes")
    return decode(path.read_bytes())


def write_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` so that readers see the old file or the new one, never a mix.

    The temporary file lives in the same directory (os.replace is atomic only within one file system) and is
    flushed to disk before the rename; on any failure it is removed and the original is untouched.
    """
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    # Makes the rename itself durable; not supported everywhere (e.g. Windows), where it is skipped.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
