from __future__ import annotations

import contextlib
import functools
import html
import http.server
import json
import os
import re
import shutil
import textwrap
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
KB = REPO / "kb"

# A small but complete entry, used as the starting point of knowledge bases built in tests. Its signature and
# example are PyTorch's real wording (captured with torch 2.13.0 on the CPU).
GOOD_ENTRY = textwrap.dedent(
    """\
    # yaml-language-server: $schema=../schema/entry.schema.json
    id: demo-device-mismatch
    title: Tensors on different devices
    summary: An operation received tensors that live on different devices, for example one on the CPU and one on a GPU.
    phase: forward
    tags: [pytorch, tensors, crash]
    severity: high
    status: stable
    since: 0.1.0
    signatures:
      - kind: literal
        text: "Expected all tensors to be on the same device"
    symptoms:
      - The first forward pass raises a RuntimeError.
    causes:
      - A tensor was created on the CPU while the model was moved to a GPU.
    checklist:
      - The message names two devices.
    fix:
      summary: Move every input to the model's device before the call.
      body: Call `.to(device)` on each input tensor.
    response:
      retry: "no"
      blame: code
    examples:
      match:
        - text: "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
          source: "captured: torch 2.13.0 (CPU)"
      no_match:
        - text: "All tensors are on the same device"
          note: a log line that only mentions devices
    """
)


def variant(*changes: tuple[str, str], entry: str = GOOD_ENTRY) -> str:
    """`entry` (GOOD_ENTRY unless given) with each (old, new) change made in turn. An `old` that is not in the text
    fails the test at once, so no test goes on checking an entry that its change never reached."""
    for old, new in changes:
        assert old in entry, f"not in the entry: {old!r}"
        entry = entry.replace(old, new)
    return entry

def entry_yaml(entry_id: str, signatures: Sequence[str | Mapping[str, Any]], match: Sequence[str | Mapping[str, Any]],
               no_match: Sequence[str | Mapping[str, Any]] = (), *, title: str | None = None,
               conditions: Mapping[str, Any] | None = None, status: str = "draft") -> str:
    """A complete entry around the given signatures and examples: a str is a literal signature, or a match example
    captured from generated text; a mapping is written as it is. The prose is generic and the same in every test."""

    def flow(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False)  # JSON is YAML: any text, quotes and line breaks included

    sigs = [{"kind": "literal", "text": s} if isinstance(s, str) else dict(s) for s in signatures]
    hits = [{"text": m, "source": "captured: generated 1.0"} if isinstance(m, str) else dict(m) for m in match]
    misses = [{"text": m, "note": "a generated look-alike"} if isinstance(m, str) else dict(m) for m in no_match]
    lines = [
        "# yaml-language-server: $schema=../schema/entry.schema.json",
        f"id: {entry_id}",
        f"title: {flow(title or 'Generated failure ' + entry_id)}",
        "summary: A generated entry that exists only to exercise the matcher and the toolkit in tests.",
        "phase: runtime", "tags: [pytorch]", "severity: high", f"status: {status}", "since: 0.2.0",
        "signatures:", *(f"  - {flow(s)}" for s in sigs),
    ]
    if conditions:
        lines.append(f"conditions: {flow(dict(conditions))}")
    lines += ["symptoms: [A generated symptom.]", "causes: [A generated cause.]", "checklist: [A generated check.]",
              "fix:", "  summary: A generated fix.", "  body: A generated fix body.", "examples:", "  match:",
              *(f"    - {flow(m)}" for m in hits)]
    if misses:
        lines += ["  no_match:", *(f"    - {flow(m)}" for m in misses)]
    return "\n".join(lines) + "\n"

@pytest.fixture()
def make_kb(tmp_path: Path) -> Callable[..., Path]:
    """A temporary knowledge base: the real tag vocabulary plus the given {file name: text} entries."""

    def build(files: dict[str, str | bytes] | None = None, *, with_good: bool = True) -> Path:
        root = tmp_path / "kb"
        root.mkdir(exist_ok=True)
        shutil.copy(KB / "_tags.yaml", root / "_tags.yaml")
        if with_good:
            (root / "demo-device-mismatch.yaml").write_text(GOOD_ENTRY, encoding="utf-8")
        for name, text in (files or {}).items():
            target = root / name
            if isinstance(text, bytes):
                target.write_bytes(text)
            else:
                target.write_text(text, encoding="utf-8")
        return root

    return build


def chromium_or_skip() -> str:
    """The system Chromium for the browser tests: skipped without one on a developer's machine, a failure in CI."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("CI"):
        pytest.fail("CI must install chromium (see .ci/run)")
    pytest.skip("chromium is not installed (apt-get install chromium)")


@contextlib.contextmanager
def serve_directory(root: Path) -> Iterator[str]:
    """A built site served on loopback for a browser test; yields its base URL."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # keep the test output readable
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()  # the listening socket too


# --- links in built pages, whatever the builder -----------------------------------------------------------------
# mkdocs writes `href="../x/"`, Zensical `href=".././x/"` or `href="./../x/"` for the same link: tests compare
# where a link leads (a path from the site's root), never its spelling.

_ANCHOR = re.compile(r"<a\s[^>]*?href=\"([^\"]*)\"[^>]*>(.*?)</a>", re.S)


def site_path(page: str, href: str) -> str:
    """Where `href` on the page at `page` (a path from the site's root, such as "entries/x/") leads, as a path
    from the root with a trailing slash for a directory: "entries/y/"; an absolute URL is returned as is."""
    from urllib.parse import urljoin, urlsplit

    href = html.unescape(href)
    if urlsplit(href).scheme:
        return href
    resolved = urlsplit(urljoin("http://site/" + page, href)).path
    return resolved.lstrip("/")


def links(text: str, page: str) -> list[tuple[str, str]]:
    """(target from the site's root, inner HTML) of every anchor in `text`, the HTML of the page at `page`."""
    return [(site_path(page, h), inner) for h, inner in _ANCHOR.findall(text)]
