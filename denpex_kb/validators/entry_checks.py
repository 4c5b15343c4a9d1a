"""Checks that look at one entry at a time."""

from __future__ import annotations

import re
import textwrap
import unicodedata
from collections.abc import Iterable

from ..loader import SCHEMA_LINE, KnowledgeBase, Loaded
from ..model import Entry, FingerprintEvent, Signature
from ..problems import Problem
from ..shellwords import PLACEHOLDER, UnclosedQuote, unquoted
from ..signatures import SignatureError, compile_signature
from . import EntryCheck, register


@register
class FileNameIsId(EntryCheck):
    code = "DKB004"

    def check(self, loaded: Loaded, kb: KnowledgeBase) -> Iterable[Problem]:
        if loaded.path.stem != loaded.entry.id:
            yield self.problem(
                loaded, ("id",), f"the file name must equal the id: rename the file to {loaded.entry.id}.yaml or change the id to {loaded.path.stem!r}"
            )


@register
class SchemaComment(EntryCheck):
    code = "DKB006"

    def check(self, loaded: Loaded, kb: KnowledgeBase) -> Iterable[Problem]:
        with loaded.path.open(encoding="utf-8") as fh:
            first = fh.readline().rstrip("\n")
        if first != SCHEMA_LINE:
            yield self.problem_at(loaded, 1, 1, f"the first line must be `{SCHEMA_LINE}`")


@register
class TagsInVocabulary(EntryCheck):
    code = "DKB103"

    def check(self, loaded: Loaded, kb: KnowledgeBase) -> Iterable[Problem]:
        entry = loaded.entry
        if not isinstance(entry, Entry) or not kb.tags:
            return
        groups = kb.tag_group
        for i, tag in enumerate(entry.tags):
            if tag not in groups:
                yield self.problem(loaded, ("tags", i), f"tag {tag!r} is not in kb/_tags.yaml; use a listed tag or add it there with a description")
        if len(set(entry.tags)) != len(entry.tags):
            yield self.problem(loaded, ("tags",), "a tag is listed twice; remove the duplicate")
        if not any(groups.get(t) == "framework" for t in entry.tags):
            yield self.problem(loaded, ("tags",), "add at least one framework tag (see the `framework` group in kb/_tags.yaml)")


def _browser_problem(pattern: str) -> str | None:
    """Why the hub's paste box could not run this RE2 pattern as a JavaScript regex, or None."""
    from ..site.export import Untranslatable, re2_to_js

    try:
        re2_to_js(pattern)
    except Untranslatable as exc:
        return str(exc)
    return None


@register
class SignaturesCompile(EntryCheck):
    code = "DKB104"

    def check(self, loaded: Loaded, kb: KnowledgeBase) -> Iterable[Problem]:
        entry = loaded.entry
        if not isinstance(entry, Entry):
            return
        seen: set[tuple[str, str]] = set()
        for i, sig in enumerate(entry.signatures):
            key = (sig.kind.value, sig.text)
            if key in seen:
                yield self.problem(loaded, ("signatures", i, "text"), "this signature repeats an earlier one; remove it")
            seen.add(key)
            try:
                compiled = compile_signature(sig)
            except SignatureError as exc:
                yield self.problem(loaded, ("signatures", i, "text"), f"{sig.kind.value} signature: {exc}")
                continue
            untranslatable = _browser_problem(compiled.pattern)
            if untranslatable:
                yield self.problem(loaded, ("signatures", i, "text"),
                                   f"{sig.kind.value} signature: the hub's browser matcher cannot use it ({untranslatable}); "
                                   "spell it without that (e.g. `[Cc]uda` for a case-insensitive letter)")
        for i, event in enumerate(entry.fingerprint.events if entry.fingerprint else []):
            try:
                compile_signature(Signature(kind=event.kind, text=event.text))
            except SignatureError as exc:
                yield self.problem(loaded, ("fingerprint", "events", i, "text"), f"fingerprint event: {exc}")
        if entry.fingerprint:
            yield from self._info_events_lead(loaded, entry.fingerprint.events)

    def _info_events_lead(self, loaded: Loaded, events: list[FingerprintEvent]) -> Iterable[Problem]:
        # Healthy output is looked for only just before a later event (scan's lookback), so an info event after
        # a warn/error one, or a run of info events alone, could never be seen.
        levels = [ev.level for ev in events]
        if all(level == "info" for level in levels):
            yield self.problem(loaded, ("fingerprint", "events", 0, "level"),
                               "every event is `level: info`; give the event the failure prints its warn or error level")
            return
        first_other = next(k for k, level in enumerate(levels) if level != "info")
        for k in range(first_other + 1, len(levels)):
            if levels[k] == "info":
                yield self.problem(loaded, ("fingerprint", "events", k, "level"),
                                   "`level: info` events must come before every warn/error/any event; move this one "
                                   "to the front or give it its real level")


@register
class RelatedNotSelf(EntryCheck):
    code = "DKB105"

    def check(self, loaded: Loaded, kb: KnowledgeBase) -> Iterable[Problem]:
        entry = loaded.entry
        if isinstance(entry, Entry):
            for i, rel in enumerate(entry.related):
                if rel.id == entry.id:
                    yield self.problem(loaded, ("related", i, "id"), "an entry cannot be related to itself; remove this item")


@register
class PlaceholdersFilled(EntryCheck):
    code = "DKB008"

    def check(self, loaded: Loaded, kb: KnowledgeBase) -> Iterable[Problem]:
        from ..scaffold import PLACEHOLDER_MARK, placeholders

        for loc, line, col in placeholders(loaded.doc):
            value = loaded.doc
            for key in loc:
                value = value[key]
            if isinstance(value, str) and PLACEHOLDER_MARK in value:
                where = ".".join(str(k) for k in loc)
                yield self.problem_at(loaded, line, col,
                                      f"{where} still holds the scaffold's placeholder {value.strip()[:60]!r}; replace it with the real value")


@register
class ResponseGiven(EntryCheck):
    code = "DKB106"

    def check(self, loaded: Loaded, kb: KnowledgeBase) -> Iterable[Problem]:
        entry = loaded.entry
        if isinstance(entry, Entry) and entry.status == "stable" and entry.response is None:
            yield self.problem(
                loaded, ("fix",),
                "a stable entry needs a `response` block after `fix`: retry (no|yes|elsewhere|depends) and blame "
                "(code|config|data|environment|node|fabric|storage|scheduler), with a note when retry is depends",
            )


# Invisible characters that reorder text on screen (Trojan Source, CVE-2021-42574): the embeddings and overrides
# U+202A-202E, the isolates U+2066-2069 and the marks LRM, RLM and ALM. Rejected in every field and comment.
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
# Control characters (C0, DEL, C1) other than the tab and the line break.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# What real program output holds and a signature or example may keep: ANSI CSI sequences (colours ESC[31m,
# erase-line ESC[2K). Other escape sequences (OSC titles and clipboard writes, DCS, a reset) are not output a
# log line needs and stay rejected.
_ANSI_CSI = re.compile("\x1b\\[[0-?]*[ -/]*[@-~]")


def _is_output(loc: tuple[object, ...]) -> bool:
    """Fields that hold text a program printed, byte for byte: signatures, fingerprint events, examples."""
    if loc[:1] == ("signatures",) and len(loc) >= 3 and loc[2] in ("text", "anchors"):
        return True
    if loc[:2] == ("fingerprint", "events") and loc[-1] == "text":
        return True
    return loc[:1] == ("examples",) and loc[-1] == "text"


def _strings(node: object, loc: tuple[object, ...] = ()) -> Iterable[tuple[tuple[object, ...], str]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _strings(value, (*loc, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _strings(value, (*loc, i))
    elif isinstance(node, str):
        yield loc, node


def _name(ch: str) -> str:
    return f"U+{ord(ch):04X}" + (f" ({unicodedata.name(ch)})" if unicodedata.name(ch, "") else "")


@register
class TextHasNoControls(EntryCheck):
    code = "DKB108"

    def check(self, loaded: Loaded, kb: KnowledgeBase) -> Iterable[Problem]:
        text = loaded.path.read_text(encoding="utf-8")
        raw = set()
        for n, line in enumerate(text.split("\n"), 1):
            for col, ch in enumerate(line, 1):
                if ch in BIDI_CONTROLS:
                    raw.add(ch)
                    yield self.problem_at(loaded, n, col,
                                          f"invisible bidi control {_name(ch)} in the file: it makes the text display in an order other "
                                          "than the one it is read in (Trojan Source); delete it")
        for loc, value in _strings(loaded.doc):
            where = ".".join(str(k) for k in loc)
            bidi = next((ch for ch in value if ch in BIDI_CONTROLS and ch not in raw), None)
            if bidi is not None:
                yield self.problem(loaded, loc, f"{where} holds the invisible bidi control {_name(bidi)} (written as an escape): "
                                   "it makes the text display in an order other than the one it is read in (Trojan Source); delete it")
                continue
            output = _is_output(loc)
            rest = _ANSI_CSI.sub("", value) if output else value
            m = _CONTROL.search(rest)
            if m is not None:
                allowed = "signatures and examples may hold tabs and ANSI CSI sequences (ESC[...m) only" if output else (
                    "prose may hold line breaks and tabs only")
                yield self.problem(loaded, loc, f"{where} holds the control character {_name(m.group())}; delete it or write what it "
                                   f"stands for in words ({allowed})")


@register
class ExampleProvenance(EntryCheck):
    code = "DKB110"

    def check(self, loaded: Loaded, kb: KnowledgeBase) -> Iterable[Problem]:
        from ..provenance import provenance_problem
        from ..scaffold import PLACEHOLDER_MARK

        entry = loaded.entry
        if not isinstance(entry, Entry):
            return
        sources = [("match", i, ex.source) for i, ex in enumerate(entry.examples.match)]
        sources += [("no_match", i, ex.source) for i, ex in enumerate(entry.examples.no_match) if ex.source is not None]
        for kind, i, source in sources:
            if PLACEHOLDER_MARK in source:
                continue  # the placeholders check reports what `new` left to fill in
            why = provenance_problem(source)
            if why is not None:
                yield self.problem(loaded, ("examples", kind, i, "source"), f"the source {source!r} of {kind} example {i + 1} {why}")


@register
class SinceReleased(EntryCheck):
    code = "DKB112"

    def check(self, loaded: Loaded, kb: KnowledgeBase) -> Iterable[Problem]:
        from packaging.version import Version

        from .. import __version__

        if Version(loaded.entry.since) > Version(__version__):
            yield self.problem(loaded, ("since",), f"since {loaded.entry.since} is newer than this denpex-kb ({__version__}); "
                               f"a new entry ships in {__version__}")


# A fenced shell block in Markdown prose: readers copy these as they copy `run` lines.
_SHELL_FENCE = re.compile(r"^[ \t]*```(?:bash|sh|shell)[ \t]*\n(.*?)^[ \t]*```", re.M | re.S)


def _shell_texts(loaded: Loaded) -> Iterable[tuple[tuple[object, ...], str, str]]:
    """(location, text, what) for every piece of shell a reader may paste: each command's `run`, and each fenced
    bash/sh block in the prose."""
    entry = loaded.entry
    assert isinstance(entry, Entry)
    for i, command in enumerate(entry.commands):
        yield ("commands", i, "run"), command.run, "the command"
    for loc, value in _strings(loaded.doc):
        if not _is_output(loc) and loc[:1] != ("commands",):
            for m in _SHELL_FENCE.finditer(value):
                yield loc, textwrap.dedent(m.group(1)), "the shell block"


@register
class CommandSyntax(EntryCheck):
    code = "DKB111"

    def check(self, loaded: Loaded, kb: KnowledgeBase) -> Iterable[Problem]:
        if not isinstance(loaded.entry, Entry):
            return
        lines: list[str] | None = None
        for loc, shell, what in _shell_texts(loaded):
            try:
                bare = unquoted(shell)
            except UnclosedQuote as exc:
                yield self.problem(loaded, loc, f"{what} opens a {exc} quote that never closes; close it")
                continue
            for m in PLACEHOLDER.finditer(bare):
                if lines is None:
                    lines = loaded.path.read_text(encoding="utf-8").split("\n")
                word = shell[m.start():m.end()]
                line, col = _locate(lines, *loaded.where(*loc), shell, m.start())
                yield self.problem_at(
                    loaded, line, col,
                    f"bash reads {word!r} in {what} as a redirection from a file of that name; write it as a shell "
                    "variable (\"$NAME\") and say in the description or the text what to set it to",
                )


def _locate(lines: list[str], line: int, col: int, shell: str, at: int) -> tuple[int, int]:
    """The file position of `shell[at]`, found by the text of its line from the value's start on; the value's start
    where the file does not hold that line as it is (a folded scalar wraps it, a quoted one escapes it)."""
    start = shell.rfind("\n", 0, at) + 1
    end = shell.find("\n", at)
    text = shell[start:end if end >= 0 else None]
    for n in range(line, len(lines) + 1):
        found = lines[n - 1].find(text, col - 1 if n == line else 0)
        if found >= 0:
            return n, found + 1 + at - start
    return line, col
