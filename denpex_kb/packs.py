"""Third-party packs: failure entries an organisation keeps outside this knowledge base (its cluster's own failures),
installed as Python distributions and found through the entry-point group `denpex_kb.packs`, as pySigma finds its
plugins.

A pack's distribution declares, in its pyproject.toml:

    [project.entry-points."denpex_kb.packs"]
    acme = "acme_kb"

The entry point names a package whose `kb/` directory holds the entry YAML files (written and checked like
`kb/`: `denpex-kb check` includes installed packs), or a directory path, or a callable that returns one. A
package may set `ENTRY_URL = "https://wiki.example/failures/{id}"`: the page `match` and `scan` link for its
entries. The entry point's name labels the pack's entries wherever they are reported.

At run time a pack is compiled once per content and kept in a cache directory; its compiled rows are merged into
the shipped bundle (`bundle.with_packs`). A pack that cannot be read is left out with a warning: a private pack
must never stop `match` from answering with the rest.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from . import __version__
from .errors import DenpexError
from .pack_probe import GROUP, disabled, may_declare_packs

CACHE_ENV = "DENPEX_KB_CACHE"  # where compiled packs are kept (default: the user's cache directory)


class PackError(DenpexError):
    """An installed pack that cannot be used: its entry point does not load or does not name a directory."""


@dataclass(frozen=True)
class Pack:
    name: str  # the entry point's name: how reports label the pack's entries
    distribution: str
    version: str
    root: Path  # the directory of its entry YAML files (an optional _tags.yaml adds tags)
    entry_url: str | None = None  # a template with {id}: the page for each entry

    @property
    def label(self) -> str:
        return f"{self.name} ({self.distribution} {self.version})"

    def files(self) -> list[Path]:
        return sorted(p for p in self.root.glob("*.yaml") if not p.name.startswith("_"))


def _root_of(obj: Any, name: str) -> tuple[Path, str | None]:
    url = getattr(obj, "ENTRY_URL", None) if isinstance(obj, ModuleType) else None
    if isinstance(obj, ModuleType):
        base = Path(obj.__file__ or "").parent if getattr(obj, "__file__", None) else None
        if base is None:
            raise PackError(f"pack {name!r}: module {obj.__name__} has no directory")
        root = base / "kb" if (base / "kb").is_dir() else base
    elif isinstance(obj, (str, os.PathLike)):
        root = Path(obj)
    elif callable(obj):
        return _root_of(obj(), name)
    else:
        raise PackError(f"pack {name!r}: the entry point must name a package, a directory or a callable returning one")
    if not root.is_dir():
        raise PackError(f"pack {name!r}: {root} is not a directory")
    if url is not None and (not isinstance(url, str) or "{id}" not in url):
        raise PackError(f"pack {name!r}: ENTRY_URL must be a string with an {{id}} placeholder")
    return root, url


def installed() -> tuple[list[Pack], list[str]]:
    """The installed packs, in name order, and a warning for each one that could not be used."""
    if disabled() or not may_declare_packs():
        return [], []
    from importlib.metadata import entry_points

    packs: list[Pack] = []
    warnings: list[str] = []
    seen: set[str] = set()
    for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        if ep.name in seen:  # the same distribution on sys.path twice
            continue
        seen.add(ep.name)
        dist = ep.dist
        try:
            root, url = _root_of(ep.load(), ep.name)
        except Exception as exc:  # noqa: BLE001 - a broken private pack must not stop the rest from working
            warnings.append(f"pack {ep.name!r} left out: {exc}")
            continue
        packs.append(Pack(ep.name, dist.name if dist else ep.value, dist.version if dist else "?", root, url))
    return packs, warnings


def _fingerprint(pack: Pack) -> str:
    """Changes whenever the pack's files or this denpex-kb change: the key of its compiled copy."""
    h = hashlib.sha256(f"{__version__}\0{pack.name}\0{pack.version}\0{pack.entry_url}".encode())
    for path in pack.files():
        st = path.stat()
        h.update(f"\0{path.name}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return h.hexdigest()[:24]


def cache_dir() -> Path:
    given = os.environ.get(CACHE_ENV)
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "denpex-kb" / "packs"


@dataclass
class CompiledPack:
    pack: Pack
    index: dict[str, Any]
    entries: dict[str, Any]
    fuzzy: dict[str, Any]


def compile_pack(pack: Pack) -> CompiledPack:
    """Load and compile one pack's entries (the model and the compiler are imported only here). Entries that do
    not load are left out; `denpex-kb check` reports why."""
    from .compiler import compile_fuzzy, compile_kb
    from .loader import load_pack_entries

    kb = load_pack_entries(pack)
    index, full = compile_kb(kb)
    for row in index["entries"]:
        row["pack"] = pack.name
        if pack.entry_url:
            row["page"] = pack.entry_url.format(id=row["id"])
    return CompiledPack(pack, index, full, compile_fuzzy(kb) | {"digest": index["digest"]})


def _cached(pack: Pack, build: Callable[[Pack], CompiledPack]) -> CompiledPack:
    path = cache_dir() / f"{pack.name}-{_fingerprint(pack)}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return CompiledPack(pack, data["index"], data["entries"], data["fuzzy"])
    except (OSError, ValueError, KeyError):
        pass
    compiled = build(pack)
    try:  # a read-only home only costs the next start a compile
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"index": compiled.index, "entries": compiled.entries, "fuzzy": compiled.fuzzy}),
                       encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass
    return compiled


def stderr_warner(prefix: str) -> Callable[[str], None]:
    return lambda message: print(f"{prefix}: {message}", file=sys.stderr)


def discovered(warn: Callable[[str], None] | None = None) -> list[Pack]:
    """The installed packs that could be found; what could not is said through `warn` (stderr by default)."""
    say = warn or stderr_warner("denpex-kb")
    packs, warnings = installed()
    for message in warnings:
        say(message)
    return packs


def compiled_packs(warn: Callable[[str], None] | None = None) -> list[CompiledPack]:
    """Every installed pack, compiled (from the cache when its files have not changed)."""
    say = warn or stderr_warner("denpex-kb")
    packs = discovered(say)
    out = []
    for pack in packs:
        try:
            out.append(_cached(pack, compile_pack))
        except Exception as exc:  # noqa: BLE001 - see installed()
            say(f"pack {pack.name!r} left out: {exc}")
    return out
