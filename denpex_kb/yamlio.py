"""Reading entry files safely, with the line and column of every key kept for error messages."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import AliasEvent, CollectionEndEvent, CollectionStartEvent, ScalarEvent

from .errors import LocatedError

MAX_FILE_BYTES = 1_000_000  # an entry is a few KB; anything near this is a mistake or an attack
MAX_DEPTH = 32  # entries nest four or five levels deep
MAX_EVENTS = 200_000
MAX_INT_DIGITS = 100  # entries hold small counts; Python refuses to convert ints past 4,300 digits anyway
_PLAIN_INT = re.compile(r"[-+]?[0-9][0-9_]*")


class YamlProblem(LocatedError):
    """The text cannot be read as an entry's YAML; `line` and `col` are 1-based, `code` is what the loader reports."""

    code = "DKB001"


class DuplicateKey(YamlProblem):
    """A key written twice in one mapping."""

    code = "DKB002"


def _rt_yaml() -> YAML:
    y = YAML(typ="rt", pure=True)
    y.allow_duplicate_keys = False
    return y


def decode(raw: bytes) -> str:
    if raw.startswith(b"\xef\xbb\xbf"):
        raise YamlProblem("the file starts with a byte-order mark; save it as UTF-8 without BOM", 1, 1)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = raw[: exc.start]
        line = before.count(b"\n") + 1
        col = exc.start - (before.rfind(b"\n") + 1) + 1
        raise YamlProblem(f"byte 0x{raw[exc.start]:02x} is not valid UTF-8; save the file as UTF-8", line, col) from None


def _precheck(text: str) -> None:
    """Walk the event stream before building anything: no aliases, bounded depth and size."""
    depth = 0
    for count, event in enumerate(_rt_yaml().parse(io.StringIO(text)), 1):
        if count > MAX_EVENTS:
            raise YamlProblem("the file is too large for an entry; split it or remove generated content")
        mark = event.start_mark
        if isinstance(event, AliasEvent):
            raise YamlProblem(
                "YAML aliases (*name) are not allowed in entries; write the value out", mark.line + 1, mark.column + 1
            )
        if isinstance(event, ScalarEvent) and not event.style and _PLAIN_INT.fullmatch(event.value):
            digits = sum(ch.isdigit() for ch in event.value)
            if digits > MAX_INT_DIGITS:
                raise YamlProblem(
                    f"a number of {digits} digits; no field of an entry holds a number that long "
                    f"(at most {MAX_INT_DIGITS} digits): shorten it, or quote it if it is text",
                    mark.line + 1,
                    mark.column + 1,
                )
        if isinstance(event, CollectionStartEvent):
            if getattr(event, "anchor", None):
                raise YamlProblem(
                    "YAML anchors (&name) are not allowed in entries; write the value out", mark.line + 1, mark.column + 1
                )
            depth += 1
            if depth > MAX_DEPTH:
                raise YamlProblem(
                    f"nesting deeper than {MAX_DEPTH} levels; an entry never needs that", mark.line + 1, mark.column + 1
                )
        elif isinstance(event, CollectionEndEvent):
            depth -= 1


def load_text(text: str) -> Any:
    try:
        _precheck(text)
        return _rt_yaml().load(text)
    except YamlProblem:
        raise
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = (exc.problem or str(exc)).strip()
        hint = ""
        duplicate = "duplicate key" in what or "found duplicate key" in str(exc)
        if "found character '\\t'" in what or "\t" in what:
            hint = "; indent with spaces, not tabs"
        elif duplicate:
            what = "duplicate key " + (what.split('"')[1] if '"' in what else "")
            hint = "; each key may appear once, merge the two"
        line = mark.line + 1 if mark else 1
        col = mark.column + 1 if mark else 1
        raise (DuplicateKey if duplicate else YamlProblem)(f"YAML syntax: {what}{hint}", line, col) from None
    except (YAMLError, RecursionError, ValueError) as exc:
        message = f"YAML syntax: {exc}".splitlines()[0]
        raise (DuplicateKey if "duplicate key" in message else YamlProblem)(message) from None


def load_file(path: Path) -> Any:
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise YamlProblem(f"the file is {size} bytes; entries must be under {MAX_FILE_BYTES} bytes")
    with path.open("rb") as fh:
        raw = fh.read(MAX_FILE_BYTES + 1)
    return load_text(decode(raw))


def to_plain(node: Any) -> Any:
    """Round-trip containers and scalar subclasses to plain Python values."""
    if isinstance(node, dict):
        return {str(k): to_plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [to_plain(v) for v in node]
    if isinstance(node, str):
        return str(node)
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    return node


def position(root: Any, loc: tuple[Any, ...], *, at_key: bool = False) -> tuple[int, int]:
    """1-based (line, col) of the deepest node on `loc` that exists in the document (its key, if at_key)."""
    line, col = 1, 1
    node = root
    for depth, key in enumerate(loc):
        if isinstance(node, CommentedMap) and key in node:
            try:
                kl, kc = node.lc.key(key)
                line, col = kl + 1, kc + 1
                vl, vc = node.lc.value(key)
                last = depth == len(loc) - 1
                if not isinstance(node[key], (CommentedMap, CommentedSeq)) and not (at_key and last):
                    line, col = vl + 1, vc + 1
            except (KeyError, TypeError):
                pass
            node = node[key]
        elif isinstance(node, CommentedSeq) and isinstance(key, int) and 0 <= key < len(node):
            try:
                il, ic = node.lc.item(key)
                line, col = il + 1, ic + 1
            except (KeyError, TypeError):
                pass
            node = node[key]
        else:
            break
    return line, col
