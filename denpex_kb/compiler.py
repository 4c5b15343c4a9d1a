"""Compiling the validated knowledge base into the bundle that ships inside the package.

The bundle has two files: `index.json`, everything the matcher needs (ids, titles, phases, compiled patterns
and anchors, one-line fixes), small enough to load in a few milliseconds; and `entries.json`, the full entries,
read only when a command needs the prose (explain, the fix and commands in a scan report).
"""

from __future__ import annotations

import builtins
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import re2

from .bundle import (
    _RE2_OPTIONS,
    _WORD,
    BUNDLE_FORMAT,
    ENTRIES_FILE,
    FUZZY_FILE,
    INDEX_FILE,
    EventRow,
    FingerprintRow,
    KbIndex,
    SignatureRow,
)
from .errors import KnowledgeBaseError
from .fuzzy import FUZZY_FORMAT, comparable, skeleton
from .loader import KnowledgeBase, load_kb
from .masks import BY_NAME
from .model import CommandPurpose, Entry, Signature, SignatureKind
from .normalize import strip_prefixes
from .problems import ProblemSeverity
from .signatures import compile_signature

__all__ = [
    "BUNDLE_FORMAT", "ENTRIES_FILE", "FUZZY_FILE", "INDEX_FILE", "anchor_keys", "compile_fuzzy", "compile_kb", "dumps",
    "index_from_kb", "index_from_kb_dir", "interior_words", "write_bundle",
]


def _verify_commands(entry: Entry) -> list[str]:
    return [c.run for c in entry.commands if c.purpose is CommandPurpose.verify]


def compile_kb(kb: KnowledgeBase) -> tuple[dict[str, Any], dict[str, Any]]:
    """Return (index, entries) as JSON-ready objects. The knowledge base must have passed `check`."""
    entries: list[dict[str, Any]] = []
    signatures: list[SignatureRow] = []
    fingerprints: list[FingerprintRow] = []
    for i, entry_id in enumerate(sorted(kb.entries)):
        entry = kb.entries[entry_id]
        entries.append(
            {
                "id": entry.id,
                "title": entry.title,
                "phase": entry.phase.value,
                "severity": entry.severity.value,
                "status": entry.status,
                "tags": list(entry.tags),
                "fix": entry.fix.summary,
                "verify": _verify_commands(entry),
                **({"versions": dict(sorted(entry.conditions.versions.items()))}
                   if entry.conditions and entry.conditions.versions else {}),
                **(
                    {"retry": entry.response.retry.value, "blame": entry.response.blame.value,
                     "response_note": entry.response.note}
                    if entry.response else {}
                ),
            }
        )
        for j, sig in enumerate(entry.signatures):
            compiled = compile_signature(sig)
            signatures.append(SignatureRow(i, j, compiled.pattern, list(compiled.anchors), compiled.specificity,
                                           sig.role.value, sig.stream.value, dict(sorted(sig.versions.items())), []))
        if entry.fingerprint:
            events = [compile_signature(Signature(kind=ev.kind, text=ev.text)) for ev in entry.fingerprint.events]
            fingerprints.append(FingerprintRow(i, entry.fingerprint.within_lines, [
                EventRow(c.pattern, list(c.anchors), ev.level) for c, ev in zip(events, entry.fingerprint.events, strict=True)
            ]))
    keys = anchor_keys([row.anchors for row in signatures])
    signatures = [row._replace(keys=k) for row, k in zip(signatures, keys, strict=True)]
    full = {
        entry_id: kb.entries[entry_id].model_dump(mode="json", exclude_none=True) for entry_id in sorted(kb.entries)
    }
    tombstones = {k: v.replaced_by for k, v in sorted(kb.tombstones.items())}
    digest = hashlib.sha256(json.dumps([full, tombstones], sort_keys=True).encode()).hexdigest()
    index = {
        "format": BUNDLE_FORMAT,
        "digest": digest,
        "entries": entries,
        "signatures": signatures,
        "fingerprints": fingerprints,
        "tombstones": tombstones,
    }
    return index, {"format": BUNDLE_FORMAT, "digest": digest, "entries": full}


_PLACEHOLDER = re.compile(r"\{([a-z]+)(?::[a-z0-9_]+)?\}")
# Placeholders that stand for a number in the printed line are masked as one; the others (words, hosts, quoted
# text, anything) say nothing about the wording and are left out of the skeleton.
_AS_NUMBER = {"int", "rank", "pid", "num"}
# An exception class is evidence for an entry only when it names the failure: Python's own classes
# (RuntimeError, KeyError, ...) are raised for everything.
_GENERIC_EXCEPTIONS = {name for name in dir(builtins) if name.endswith(("Error", "Exception", "Exit"))}
# ...and only when at most this many entries' examples raise it, and each names the class in one of its
# signatures, their notes or its summary (its authors claim the class as the failure's).
_EVIDENCE_ENTRIES = 2
# An exception class as a traceback's last line prints it, wherever a log prefix puts it.
_RAISED = re.compile(r"(?<![\w.])((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception))(?=:|\s*$)", re.M)


def _fixed_text(sig: Signature) -> str:
    """A signature's wording with its variable parts as mask tokens: what a printed line's skeleton looks like."""
    if sig.kind is SignatureKind.literal:
        return sig.text
    if sig.kind is SignatureKind.template:
        def token(m: re.Match[str]) -> str:
            name = m.group(1)
            mask = BY_NAME.get(name)
            if name in _AS_NUMBER:
                return "0"
            return "" if mask is None or not mask.masks_lines else m.group(0)

        return _PLACEHOLDER.sub(token, sig.text)
    return " ".join(compile_signature(sig).anchors)


# Context kept around a signature's match in an example line: a line that carries several messages (a whole
# log pasted as one line) contributes the wording near the failure, not the rest.
_CONTEXT = 60


def _example_lines(text: str, patterns: list[Any]) -> list[tuple[str, int]]:
    """The parts of a real example that the entry's own signatures match, with the signature's position: the
    failure's words, not the frames and noise around them. A wrapped example no single line matches gives
    nothing."""
    out = []
    for raw in text.splitlines():
        line = strip_prefixes(raw).text
        for j, p in enumerate(patterns):
            m = p.search(line)
            if m is not None:
                out.append((line[max(0, m.start() - _CONTEXT): m.end() + _CONTEXT], j))
                break
    return out


def _prune(known: list[list[Any]], no_match: dict[int, list[str]]) -> list[list[Any]]:
    """Known wordings that one of the entry's own no_match examples resembles are not distinctive (the value
    that decides is masked away, as in `nan iterations: 0`): they are left out."""
    from .fuzzy import THRESHOLD, FuzzyIndex, comparable, informational

    # Scores weigh words by their rarity among the wordings kept, so dropping some changes the others' scores:
    # repeat until the index that ships has no own wording a no_match example reaches.
    while True:
        fz = FuzzyIndex({"format": FUZZY_FORMAT, "known": known, "evidence": {}})
        drop: set[int] = set()
        for entry, texts in no_match.items():
            own = [k for k, row in enumerate(known) if row[0] == entry]
            for text in texts:
                for raw in text.splitlines():
                    sk = skeleton(raw)
                    if informational(raw) or not comparable(sk):
                        continue
                    drop.update(k for k in own if fz.score(k, sk) >= THRESHOLD)
        if not drop:
            return known
        known = [row for k, row in enumerate(known) if k not in drop]


def compile_fuzzy(kb: KnowledgeBase) -> dict[str, Any]:
    """The fuzzy tier's data: the skeleton of every signature's fixed text and every real example line, and the
    exception classes that are evidence for one or two entries (see `denpex_kb/fuzzy.py`)."""
    known: list[list[Any]] = []
    raised: dict[str, dict[int, int]] = {}
    claimed: dict[int, str] = {}
    no_match: dict[int, list[str]] = {}
    for i, entry_id in enumerate(sorted(kb.entries)):
        entry = kb.entries[entry_id]
        seen: set[str] = set()
        patterns = [re2.compile(compile_signature(sig).pattern, _RE2_OPTIONS) for sig in entry.signatures]
        roles = [sig.role.value for sig in entry.signatures]

        def add(text: str, role: str, origin: str, seen: set[str] = seen, i: int = i) -> None:
            sk = skeleton(text)
            if comparable(sk) and sk not in seen:
                seen.add(sk)
                known.append([i, role, origin, sk])

        for j, sig in enumerate(entry.signatures):
            if sig.kind is not SignatureKind.regex:  # a regex's anchors are a fraction of what it requires
                add(_fixed_text(sig), roles[j], f"signature:{j}")
        claimed[i] = " ".join([entry.summary, *(f"{_fixed_text(sig)} {sig.note or ''}" for sig in entry.signatures)])
        for n, example in enumerate(entry.examples.match):
            for part, j in _example_lines(example.text, patterns):
                add(part, roles[j], f"example:{n}")
            for exc in set(_RAISED.findall(example.text)):  # keyed as printed: torch.X is not evidence for X
                raised.setdefault(exc, {}).setdefault(i, 0)
                raised[exc][i] += 1
        no_match[i] = [example.text for example in entry.examples.no_match]
    evidence: dict[str, list[int]] = {}
    for name, by_entry in sorted(raised.items()):
        short = name.rsplit(".", 1)[-1]
        if short in _GENERIC_EXCEPTIONS or len(by_entry) > _EVIDENCE_ENTRIES:
            continue
        if not all(re.search(rf"\b{re.escape(short)}\b", claimed[e]) for e in by_entry):
            continue
        evidence[name] = sorted(by_entry, key=lambda e: (-by_entry[e], e))
    return {"format": FUZZY_FORMAT, "known": _prune(known, no_match), "evidence": evidence}


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n"


def write_bundle(kb: KnowledgeBase, out_dir: Path) -> list[Path]:
    index, full = compile_kb(kb)
    fuzzy = compile_fuzzy(kb) | {"digest": index["digest"]}
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, obj in ((INDEX_FILE, index), (ENTRIES_FILE, full), (FUZZY_FILE, fuzzy)):
        path = out_dir / name
        tmp = path.with_suffix(".tmp")
        tmp.write_text(dumps(obj), encoding="utf-8")
        tmp.replace(path)
        written.append(path)
    return written


def interior_words(anchor: str) -> list[str]:
    """Words of `anchor` that are whole words in any line containing it (not cut by the anchor's edges)."""
    words = []
    for m in _WORD.finditer(anchor):
        if m.start() == 0 or m.end() == len(anchor) or len(m.group()) < 3:
            continue
        words.append(m.group())
    return words




def anchor_keys(anchor_lists: list[list[str]]) -> list[list[str | None]]:
    """For each signature's anchors, the word to file each under: its rarest interior word across the whole
    knowledge base (None: no usable word). Computed when compiling, so loading the bundle stays cheap."""
    words = [[interior_words(a) for a in anchors] for anchors in anchor_lists]
    freq: dict[str, int] = {}
    for per_sig in words:
        for ws in per_sig:
            for w in set(ws):
                freq[w] = freq.get(w, 0) + 1
    return [[min(ws, key=lambda w: (freq[w], -len(w), w)) if ws else None for ws in per_sig] for per_sig in words]


def index_from_kb_dir(path: Path, *, strict: bool = True) -> KbIndex:
    """Compile a knowledge-base directory in memory (for `--kb DIR`); see `index_from_kb`."""
    return index_from_kb(load_kb(path), strict=strict)


def without_broken_files(kb: KnowledgeBase) -> tuple[KnowledgeBase, list[str]]:
    """The knowledge base without the entry files that have errors (a scaffold from `new` still being filled
    in, an entry with a typo), and those files' paths: `match --kb` and `scan --kb` answer from the rest. Errors
    that belong to no entry file (the tag vocabulary, a missing directory) stay, so compiling still refuses them."""
    from dataclasses import replace

    from .validators import run_checks

    entry_files = set(kb.read)  # loaded or not; the vocabulary and other `_` files are not among them
    broken = sorted({p.path for p in run_checks(kb) if p.severity is ProblemSeverity.error and p.path in entry_files})
    if not broken:
        return kb, []
    keep = {i: loaded for i, loaded in kb.files.items() if loaded.display not in broken}
    rest = replace(
        kb,
        files=keep,
        entries={i: e for i, e in kb.entries.items() if i in keep},
        tombstones={i: t for i, t in kb.tombstones.items() if i in keep},
        problems=[p for p in kb.problems if p.path not in broken],
    )
    return rest, broken


def index_from_kb(kb: KnowledgeBase, *, strict: bool = True) -> KbIndex:
    """Compile a loaded knowledge base (with any packs it was loaded with) in memory.

    strict: any error raises KnowledgeBaseError (a ValueError). Otherwise entries whose signatures do not compile
    are left out and other problems are ignored, so examples can be tested while a knowledge base is still being
    written.
    """
    from dataclasses import replace

    from .validators import run_checks

    errors = [p for p in run_checks(kb) if p.severity is ProblemSeverity.error]
    if not strict:
        broken = {p.path for p in errors if p.check == "signatures"}
        kept = {i: e for i, e in kb.entries.items() if kb.files[i].display not in broken}
        kb = replace(kb, entries=kept)  # the caller's knowledge base stays whole
        errors = []
    if errors:
        raise KnowledgeBaseError(
            "the knowledge base has problems; run `denpex-kb check`:\n" + "\n".join(p.render() for p in errors[:20]), errors
        )
    index, full = compile_kb(kb)
    for row in index["entries"]:
        pack = kb.packs.get(row["id"])
        if pack is not None:
            row["pack"] = pack
    fuzzy = compile_fuzzy(kb) | {"digest": index["digest"]}
    return KbIndex(index, lambda: full, str(kb.root), lambda: fuzzy)
