"""The compiled knowledge base at run time: loaded from the shipped bundle, patterns compiled on first use.

Load cost is what a fresh `denpex-kb match` pays, so it stays proportional to the index file: no regex is
compiled until a line contains one of its anchors.
"""

from __future__ import annotations

import gc
import json
import os
import re
from functools import cached_property
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from pathlib import Path

    from .fuzzy import FuzzyIndex
    from .packs import CompiledPack

import re2

from .errors import BundleError
from .urls import entry_url

BUNDLE_FORMAT = 6
INDEX_FILE = "index.json"
ENTRIES_FILE = "entries.json"
FUZZY_FILE = "fuzzy.json"  # the fuzzy tier's skeletons, read only when the exact tiers find nothing

_WORD = re.compile(r"\w+")
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.max_mem = 64 << 20


class EntryInfo(NamedTuple):
    """What the matcher reports of an entry; the prose stays in entries.json until asked for."""

    id: str
    title: str
    phase: str
    severity: str
    status: str
    tags: tuple[str, ...]
    fix: str
    verify: tuple[str, ...]  # the commands that prove the fix worked
    retry: str | None = None  # the entry's response: no | yes | elsewhere | depends (None for drafts without one)
    blame: str | None = None
    response_note: str | None = None
    # conditions.versions: package -> PEP 440 specifier of the affected versions, as (package, spec) pairs
    versions: tuple[tuple[str, str], ...] = ()
    pack: str | None = None  # the installed pack the entry comes from (see packs.py); None: this knowledge base
    page: str | None = None  # a pack entry's own page, when the pack names one

    @property
    def url(self) -> str:
        """The entry's page: the hub's, or the one its pack names ("" when a pack names none)."""
        if self.pack is None:
            return entry_url(self.id)
        return self.page or ""


class SignatureRow(NamedTuple):
    """A signature as index.json stores it (a JSON array in this order): the compiler writes these and KbIndex
    reads them, so both name the fields instead of counting positions."""

    entry: int  # position in the index's entries
    number: int  # position among the entry's signatures
    pattern: str  # RE2
    anchors: list[str]
    specificity: int
    role: str
    stream: str
    versions: dict[str, str]  # the releases that print this wording; {} when every release does
    keys: list[str | None]  # the word each anchor is filed under in the word index


class EventRow(NamedTuple):
    pattern: str
    anchors: list[str]
    level: str


class FingerprintRow(NamedTuple):
    entry: int
    within: int
    events: list[EventRow]


class IndexedSignature:
    __slots__ = ("_regex", "anchors", "entry", "number", "pattern", "role", "specificity", "stream", "versions")

    def __init__(self, entry: EntryInfo, number: int, pattern: str, anchors: list[str], specificity: int, role: str,
                 stream: str, versions: tuple[tuple[str, str], ...] = ()) -> None:
        self.entry = entry
        self.number = number
        self.pattern = pattern
        self.anchors = tuple(anchors)
        self.specificity = specificity
        self.role = role
        self.stream = stream
        self.versions = versions  # (package, specifier) pairs of the releases that print this wording
        self._regex: Any = None

    @property
    def regex(self) -> Any:
        if self._regex is None:
            self._regex = re2.compile(self.pattern, _RE2_OPTIONS)
        return self._regex


class IndexedEvent:
    __slots__ = ("_regex", "anchors", "level", "pattern")

    def __init__(self, pattern: str, anchors: tuple[str, ...], level: str = "any") -> None:
        self.pattern = pattern
        self.anchors = anchors
        self.level = level
        self._regex: Any = None

    @property
    def deferred(self) -> bool:
        """Healthy output (an INFO line): looked for only in the lines just before the sequence's next event."""
        return self.level == "info"

    def matches(self, text: str) -> bool:
        if not any(a in text for a in self.anchors):
            return False
        if self._regex is None:
            self._regex = re2.compile(self.pattern, _RE2_OPTIONS)
        return self._regex.search(text) is not None


class Lookback(NamedTuple):
    """Where the scanner looks back for a fingerprint's leading `info` events (see KbIndex.lookbacks)."""

    event: IndexedEvent  # the trigger: a line holding its anchors looks back only if it matches the event
    anchors: tuple[str, ...]
    within: int


class IndexedFingerprint(NamedTuple):
    """An ordered run of events that, seen within `within` lines, identifies the entry."""

    entry: EntryInfo
    within: int
    events: list[IndexedEvent]


def _signature(entries: list[EntryInfo], row: SignatureRow) -> IndexedSignature:
    return IndexedSignature(entries[row.entry], row.number, row.pattern, row.anchors, row.specificity, row.role, row.stream,
                       tuple(sorted(row.versions.items())))


def _fingerprint(entries: list[EntryInfo], row: FingerprintRow) -> IndexedFingerprint:
    events = [IndexedEvent(ev.pattern, tuple(ev.anchors), ev.level) for ev in (EventRow(*e) for e in row.events)]
    return IndexedFingerprint(entries[row.entry], row.within, events)


class KbIndex:
    """What the matcher and scanner need: entries, signatures, and a word index over their anchors."""

    def __init__(self, index: dict[str, Any], entries_loader: Any = None, source: str = "",
                 fuzzy_loader: Any = None) -> None:
        # Tens of thousands of small objects are built here and none is garbage: pausing the cyclic GC
        # keeps it from scanning them again and again while they are made.
        paused = gc.isenabled()
        gc.disable()
        try:
            self._load(index, entries_loader, source)
            self._fuzzy_loader = fuzzy_loader
        finally:
            if paused:
                gc.enable()

    def _load(self, index: dict[str, Any], entries_loader: Any, source: str) -> None:
        if index.get("format") != BUNDLE_FORMAT:
            raise BundleError(f"bundle format {index.get('format')!r} is not {BUNDLE_FORMAT}; recompile the knowledge base")
        self.source = source
        self.digest: str = index["digest"]
        self.entries: list[EntryInfo] = [
            EntryInfo(
                e["id"], e["title"], e["phase"], e["severity"], e["status"], tuple(e["tags"]), e["fix"],
                tuple(e["verify"]), e.get("retry"), e.get("blame"), e.get("response_note"),
                tuple(sorted((e.get("versions") or {}).items())), e.get("pack"), e.get("page"),
            )
            for e in index["entries"]
        ]
        self.by_id = {e.id: e for e in self.entries}
        self.tombstones: dict[str, str | None] = index.get("tombstones", {})
        rows = [SignatureRow(*s) for s in index["signatures"]]
        self.signatures = [_signature(self.entries, row) for row in rows]
        self.fingerprints = [_fingerprint(self.entries, FingerprintRow(*f)) for f in index.get("fingerprints", [])]
        self._entries_loader = entries_loader
        self._build_word_index([row.keys for row in rows])

    def _build_word_index(self, keys: list[list[str | None]]) -> None:
        # Each anchor is filed under the word the compiler chose for it (its rarest interior word); a line is
        # checked only against the signatures filed under its own words. Anchors with no such word go into
        # one RE2 set, searched once per line.
        index: dict[str, list[IndexedSignature]] = {}
        always: dict[str, list[IndexedSignature]] = {}
        for sig, sig_keys in zip(self.signatures, keys, strict=True):
            for anchor, key in zip(sig.anchors, sig_keys, strict=False):
                bucket = index.setdefault(key, []) if key else always.setdefault(anchor, [])
                if not bucket or bucket[-1] is not sig:  # a signature's anchors are filed one after another
                    bucket.append(sig)
        self.word_index = index
        self._always_anchors = list(always)
        self._always_sigs = list(always.values())
        self._always_set: Any = None

    def _always_hits(self, text: str) -> list[IndexedSignature]:
        if not self._always_anchors:
            return []
        if self._always_set is None:
            found = re2.Set.SearchSet(_RE2_OPTIONS)
            for anchor in self._always_anchors:
                found.Add(re2.escape(anchor))
            found.Compile()
            self._always_set = found
        hits = self._always_set.Match(text) or []
        return [sig for i in hits for sig in self._always_sigs[i]]

    def candidates(self, text: str) -> list[IndexedSignature]:
        found: dict[int, IndexedSignature] = {}
        index = self.word_index
        for word in set(_WORD.findall(text)):
            bucket = index.get(word)
            if bucket:
                for sig in bucket:
                    found[id(sig)] = sig
        checked = [s for s in found.values() if any(a in text for a in s.anchors)]
        for sig in self._always_hits(text):
            if id(sig) not in found:
                found[id(sig)] = sig
                checked.append(sig)
        return checked

    @cached_property
    def full_entries(self) -> dict[str, dict[str, Any]]:
        """The full entries (prose, fix, commands), read on first use."""
        if self._entries_loader is None:
            return {}
        data = self._entries_loader()
        entries: dict[str, dict[str, Any]] = data["entries"]
        return entries

    @cached_property
    def fuzzy(self) -> FuzzyIndex | None:
        """The fuzzy tier's index, read on first use; None for a bundle compiled without one."""
        if self._fuzzy_loader is None:
            return None
        data = self._fuzzy_loader()
        if data is None:
            return None
        if data.get("digest") != self.digest:
            raise BundleError("the bundle's fuzzy.json was compiled from another knowledge base; recompile")
        from .fuzzy import FuzzyIndex  # rapidfuzz is loaded only when the fuzzy tier runs

        return FuzzyIndex(data)

    @cached_property
    def _event_anchors(self) -> tuple[Any, list[tuple[str, int]]]:
        """Every fingerprint event's anchors in one alternation (does the text hold any?), and each with its
        fingerprint's position (which ones?)."""
        pairs = [(a, k) for k, fp in enumerate(self.fingerprints) for ev in fp.events for a in ev.anchors]
        anchors = sorted({a for a, _ in pairs}, key=len, reverse=True)
        return (re.compile("|".join(map(re.escape, anchors))) if anchors else None), pairs

    def fingerprint_events(self, text: str) -> tuple[tuple[int, tuple[bool, ...]], ...]:
        """For each fingerprint with an anchor in `text` (by position; only those can be moved on by the line),
        whether the text matches each of its events. Most candidate lines hold no anchor, and one search of the
        alternation says so."""
        any_anchor, pairs = self._event_anchors
        if any_anchor is None or any_anchor.search(text) is None:
            return ()
        return tuple((k, tuple(ev.matches(text) for ev in self.fingerprints[k].events))
                     for k in sorted({k for a, k in pairs if a in text}))

    @cached_property
    def all_anchors(self) -> list[str]:
        found = {a for s in self.signatures for a in s.anchors}
        found.update(a for fp in self.fingerprints for ev in fp.events for a in ev.anchors)
        return sorted(found)

    @cached_property
    def deferred_anchors(self) -> list[str]:
        """Anchors only `info` fingerprint events have: healthy output, so not searched across the whole log."""
        kept = {a for s in self.signatures for a in s.anchors}
        kept.update(a for fp in self.fingerprints for ev in fp.events if not ev.deferred for a in ev.anchors)
        return sorted({a for fp in self.fingerprints for ev in fp.events if ev.deferred for a in ev.anchors} - kept)

    @cached_property
    def prefilter_anchors(self) -> list[str]:
        """What the scanner's prefilter searches the whole log for: every anchor but the deferred ones."""
        deferred = set(self.deferred_anchors)
        return [a for a in self.all_anchors if a not in deferred]

    @cached_property
    def lookbacks(self) -> list[Lookback]:
        """For each fingerprint led by `info` events: the anchors of its first other event (a trigger) and the
        anchors of its leading events, which the scanner looks for in the `within` lines before a trigger."""
        found = []
        for fp in self.fingerprints:
            lead = [ev for ev in fp.events if ev.deferred]
            if lead:
                trigger = fp.events[len(lead)]
                found.append(Lookback(trigger, tuple(sorted({a for ev in lead for a in ev.anchors})), fp.within))
        return found

    def __getstate__(self) -> dict[str, Any]:
        """Plain data only, for process pools and Spark executors: the compiled engines (each signature's RE2
        object, the RE2 set of word-less anchors) are dropped and rebuilt lazily after unpickling; signatures are
        kept as their fields, and the word index as positions. The entries loader (a closure) is not pickled:
        the shipped bundle is read again from the package where the index is unpickled (checked by digest), and
        any other index carries its full entries along."""
        state = dict(self.__dict__)
        entry_no = {id(e): k for k, e in enumerate(self.entries)}
        sig_no = {id(s): k for k, s in enumerate(self.signatures)}
        state["signatures"] = [
            SignatureRow(entry_no[id(s.entry)], s.number, s.pattern, list(s.anchors), s.specificity, s.role, s.stream,
                         dict(s.versions), [])
            for s in self.signatures
        ]
        state["fingerprints"] = [
            FingerprintRow(entry_no[id(f.entry)], f.within,
                           [EventRow(ev.pattern, list(ev.anchors), ev.level) for ev in f.events])
            for f in self.fingerprints
        ]
        state["word_index"] = {word: [sig_no[id(s)] for s in bucket] for word, bucket in self.word_index.items()}
        state["_always_sigs"] = [[sig_no[id(s)] for s in bucket] for bucket in self._always_sigs]
        state["_always_set"] = None
        state["entries"] = [tuple(e) for e in self.entries]
        state.pop("by_id", None)
        loader = state.pop("_entries_loader", None)
        state.pop("fuzzy", None)
        fuzzy_loader = state.pop("_fuzzy_loader", None)
        if self.source == "package" and loader is not None:
            state.pop("full_entries", None)
            state["_entries_from"] = "package"
        else:
            state["full_entries"] = self.full_entries  # the source may not exist where this is unpickled
            state["_fuzzy_data"] = fuzzy_loader() if fuzzy_loader is not None else None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        entries = [EntryInfo(*e) for e in state["entries"]]
        signatures = [_signature(entries, SignatureRow(*s)) for s in state["signatures"]]
        state["entries"] = entries
        state["by_id"] = {e.id: e for e in entries}
        state["signatures"] = signatures
        state["fingerprints"] = [_fingerprint(entries, FingerprintRow(*f)) for f in state["fingerprints"]]
        state["word_index"] = {word: [signatures[k] for k in bucket] for word, bucket in state["word_index"].items()}
        state["_always_sigs"] = [[signatures[k] for k in bucket] for bucket in state["_always_sigs"]]
        state["_always_set"] = None
        digest = state["digest"]

        def from_package() -> dict[str, Any]:
            data: dict[str, Any] = json.loads(_read_packaged(ENTRIES_FILE))
            if data.get("digest") != digest:
                raise BundleError("the knowledge base installed here differs from the one this index was pickled from "
                                 "(digest mismatch): install the same denpex-kb on every worker")
            return data

        packaged = state.pop("_entries_from", None) == "package"
        state["_entries_loader"] = from_package if packaged else None
        fuzzy_data = state.pop("_fuzzy_data", None)
        state["_fuzzy_loader"] = _packaged_fuzzy if packaged else (lambda: fuzzy_data)
        self.__dict__.update(state)


def _read_packaged(name: str) -> str:
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", name)
    if os.path.isfile(path):  # the usual case: a package installed as files
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    from importlib import resources  # a zipped install

    return resources.files("denpex_kb").joinpath("data").joinpath(name).read_text(encoding="utf-8")


def _packaged_fuzzy() -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads(_read_packaged(FUZZY_FILE))
    except FileNotFoundError:
        return None
    return data


def _fuzzy_from_dir(path: Path) -> Any:
    def load() -> dict[str, Any] | None:
        file = path / FUZZY_FILE
        if not file.is_file():
            return None
        data: dict[str, Any] = json.loads(file.read_text(encoding="utf-8"))
        return data

    return load


def with_packs(index: dict[str, Any], entries_loader: Any, fuzzy_loader: Any, packs: list[CompiledPack],
               source: str) -> KbIndex:
    """The shipped index with the compiled packs' entries appended. Each pack's rows keep the anchor keys its
    own compile chose (any whole word inside an anchor finds it). An id the knowledge base or an earlier pack
    already has is left out with a warning: a pack cannot redefine an entry."""
    import hashlib
    import sys

    merged = {**index, "entries": list(index["entries"]), "signatures": list(index["signatures"]),
              "fingerprints": list(index.get("fingerprints", [])), "tombstones": dict(index.get("tombstones", {}))}
    known = {e["id"] for e in merged["entries"]} | set(merged["tombstones"])
    extra_entries: dict[str, Any] = {}
    extra_known: list[list[Any]] = []
    extra_evidence: dict[str, list[int]] = {}
    digests = [index["digest"]]
    for compiled in packs:
        offset = len(merged["entries"])
        keep: dict[int, int] = {}  # the pack's entry number -> its number in the merged index
        for i, entry in enumerate(compiled.index["entries"]):
            if entry["id"] in known:
                print(f"denpex-kb: pack {compiled.pack.name!r}: entry {entry['id']!r} left out, the id is taken",
                      file=sys.stderr)
                continue
            known.add(entry["id"])
            keep[i] = offset + len(keep)
            merged["entries"].append(entry)
            extra_entries[entry["id"]] = compiled.entries["entries"][entry["id"]]
        merged["signatures"] += [[keep[s[0]], *s[1:]] for s in compiled.index["signatures"] if s[0] in keep]
        merged["fingerprints"] += [[keep[f[0]], *f[1:]] for f in compiled.index.get("fingerprints", []) if f[0] in keep]
        extra_known += [[keep[k[0]], *k[1:]] for k in compiled.fuzzy.get("known", []) if k[0] in keep]
        for name, numbers in compiled.fuzzy.get("evidence", {}).items():
            extra_evidence.setdefault(name, []).extend(keep[n] for n in numbers if n in keep)
        digests.append(compiled.index["digest"])
    digest = hashlib.sha256("\0".join(digests).encode()).hexdigest()
    merged["digest"] = digest

    def entries() -> dict[str, Any]:
        data: dict[str, Any] = entries_loader()
        return {**data, "digest": digest, "entries": {**data["entries"], **extra_entries}}

    def fuzzy() -> dict[str, Any] | None:
        data: dict[str, Any] | None = fuzzy_loader()
        if data is None:
            return None
        evidence = {name: list(numbers) for name, numbers in data["evidence"].items()}
        for name, numbers in extra_evidence.items():
            evidence.setdefault(name, []).extend(numbers)
        return {**data, "digest": digest, "known": [*data["known"], *extra_known], "evidence": evidence}

    return KbIndex(merged, entries, source, fuzzy)


_DEFAULT: KbIndex | None = None


def default_index() -> KbIndex:
    """The knowledge base shipped in the package (or the one named by DENPEX_KB_BUNDLE, a directory)."""
    global _DEFAULT
    if _DEFAULT is None:
        override = os.environ.get("DENPEX_KB_BUNDLE")
        if override:
            from pathlib import Path

            _DEFAULT = load_bundle_dir(Path(override))
        else:
            index = json.loads(_read_packaged(INDEX_FILE))
            entries = lambda: json.loads(_read_packaged(ENTRIES_FILE))  # noqa: E731
            packs = _installed_packs()
            if packs:
                _DEFAULT = with_packs(index, entries, _packaged_fuzzy, packs, "package+packs")
            else:
                _DEFAULT = KbIndex(index, entries, "package", _packaged_fuzzy)
    return _DEFAULT


def _installed_packs() -> list[CompiledPack]:
    from .pack_probe import disabled, may_declare_packs

    if disabled() or not may_declare_packs():
        return []
    from .packs import compiled_packs

    return compiled_packs()


def load_bundle_dir(path: Path) -> KbIndex:
    index = json.loads((path / INDEX_FILE).read_text(encoding="utf-8"))
    return KbIndex(index, lambda: json.loads((path / ENTRIES_FILE).read_text(encoding="utf-8")), str(path),
                   _fuzzy_from_dir(path))
