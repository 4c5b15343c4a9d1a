"""The hub's pages as a reader sees them: nested steps, tables, related entries, references, the home page, the
404 page, and a site that makes no request to another site."""

from __future__ import annotations

import contextlib
import functools
import html
import http.server
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from conftest import GOOD_ENTRY, KB, REPO, chromium_or_skip, links, site_path
from denpex_kb.loader import load_kb
from denpex_kb.site.blocks import read_lines, terminal_blocks
from denpex_kb.site.build import INSTALL, build_site, home_page
from denpex_kb.site.render import REPO_URL, to_terminal
from denpex_kb.site.sanitize import safe_markdown

OUTPUT = REPO / "tests" / "output"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def kb():
    return load_kb(KB)


@pytest.fixture(scope="module")
def site(kb, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hub-pages")
    build_site(kb, REPO / "mkdocs.yml", root / "docs", root / "site")
    return root / "site"


def _page(site: Path, entry_id: str) -> str:
    return (site / "entries" / entry_id / "index.html").read_text(encoding="utf-8")


def _section(page: str, anchor: str) -> str:
    return page.split(f'<h2 id="{anchor}"', 1)[1].split("<h2", 1)[0]


def _nested(body: str) -> bool:
    return any(line.kind == "item" and line.depth > 0 for line in read_lines(body))


# --- 1. Nested lists ---------------------------------------------------------------------------------------


def _top_items(fragment: str) -> list[int]:
    """For each list at the top of `fragment`: how many items it has at its own level."""
    counts: list[int] = []
    depth = 0
    for tag in re.finditer(r"<(/?)(ol|ul|li)\b", fragment):
        closing, name = tag.group(1), tag.group(2)
        if name in ("ol", "ul"):
            depth += -1 if closing else 1
            if not closing and depth == 1:
                counts.append(0)
        elif not closing and depth == 1:
            counts[-1] += 1
    return counts


def test_nested_steps_stay_nested_on_the_page(kb, site: Path):
    nested = [e for e in kb.entries.values() if _nested(e.fix.body)]
    assert len(nested) >= 10, [e.id for e in nested]  # today's KB has about 25 such bodies
    for entry in nested:
        fix = _section(_page(site, entry.id), "fix").split('<div class="tabbed-set', 1)[0]
        assert re.search(r"<li>(?:(?!</li>).)*?<(?:ol|ul)>", fix, re.S), f"{entry.id}: the sub-steps were flattened"
        top = sum(1 for line in read_lines(entry.fix.body) if line.kind == "item" and line.depth == 0)
        assert sum(_top_items(fix)) == top, (entry.id, _top_items(fix), top)


def test_cuda_oom_fix_keeps_its_four_steps_and_their_sub_steps(site: Path):
    fix = _section(_page(site, "cuda-out-of-memory"), "fix").split('<div class="tabbed-set', 1)[0]
    assert _top_items(fix)[0] == 4
    step2 = fix.split("<li>Otherwise the working set does not fit", 1)[1].split("</ul>", 1)[0]
    assert step2.count("<li>") == 5 and "halve the micro-batch" in step2
    # The closing paragraph ends the list instead of joining the last step.
    assert re.search(r"</ol>\s*<p>Calling <code>torch\.cuda\.empty_cache\(\)</code>", fix)


NESTED_HOSTILE = (
    "1. step\n   - sub `demo-device-mismatch`\n     ```bash\n     echo '<img src=x onerror=alert(1)>'\n     ```\n"
    "   - under-indented fence\n     ```\n<img src=x onerror=alert(2)>\n     ```\n"
    "2. two <script>alert(3)</script>\n   1. deep [x](javascript:alert(4))\n"
)


def test_nested_markup_is_inert_without_the_sanitizer(make_kb, monkeypatch, tmp_path: Path):
    # The Markdown rewriter alone keeps nested lists and fences inert; the allow-list is a second line.
    monkeypatch.setattr("denpex_kb.site.clean.clean_html", lambda fragment: fragment)
    doc = YAML(typ="safe").load(GOOD_ENTRY)
    doc.update(id="nested-hostile", title="Nested hostile")
    doc["fix"]["body"] = NESTED_HOSTILE
    kb = load_kb(make_kb({"nested-hostile.yaml": json.dumps(doc)}))  # JSON is YAML
    assert not [p for p in kb.problems if p.severity.value == "error"]
    build_site(kb, REPO / "mkdocs.yml", tmp_path / "docs", tmp_path / "site")  # the audit would refuse live markup
    fix = _section(_page(tmp_path / "site", "nested-hostile"), "fix")
    assert "<img" not in fix and "<script" not in fix and "javascript:" not in fix
    assert "&lt;img src=x onerror=alert(1)&gt;" in fix  # shown, as code
    assert re.search(r"<li>step<ul>\s*<li>sub", fix)
    assert ("entries/demo-device-mismatch/", "<code>demo-device-mismatch</code>") in links(fix, "entries/nested-hostile/")


# --- 2. explain ------------------------------------------------------------------------------------------


def test_explain_keeps_steps_sub_steps_and_code_as_blocks(kb):
    text = to_terminal(kb.entries["cuda-out-of-memory"], width=100)
    fix = text.split("\nFIX\n", 1)[1].split("\n\n", 1)[0].splitlines()
    step = next(i for i, line in enumerate(fix) if line.startswith("  2. Otherwise the working set"))
    sub = fix[step + 1]
    assert sub.startswith("     - halve the micro-batch"), sub
    code = next(line for line in fix if "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in line)
    assert code.strip() == "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
    assert len(code) - len(code.lstrip()) > len("  1. ")  # code sits under its step, deeper than the text
    assert [line[:5] for line in fix if re.match(r"  \d\. ", line)] == ["  1. ", "  2. ", "  3. ", "  4. "]
    assert any(line.startswith("  Calling `torch.cuda.empty_cache()`") for line in fix)
    assert "```" not in "\n".join(fix)


def test_terminal_blocks_nest_and_wrap():
    body = "Intro text\nthat wraps.\n\n1. first\n   - a\n     - b\n   ```\n   code  kept\n   ```\n2. second\n\nAfter."
    out = terminal_blocks(body, 60)
    assert out == ["  Intro text that wraps.", "  1. first", "     - a", "       - b", "         code  kept",
                   "  2. second", "  After."]


def test_explain_command_prints_the_structure(capsys):
    from denpex_kb.cli import main

    assert main(["explain", "cuda-out-of-memory"]) == 0
    out = capsys.readouterr().out
    assert "\n  2. Otherwise the working set does not fit" in out
    assert "\n     - halve the micro-batch" in out
    assert "Host memory allocation failed" in out  # a related entry, by its title


# --- 3. Conditions ---------------------------------------------------------------------------------------


def test_condition_tables_have_a_header(kb, site: Path):
    checked = 0
    for entry in kb.entries.values():
        page = _page(site, entry.id)
        if '<h2 id="conditions"' not in page:
            continue
        for head in re.findall(r"<thead>(.*?)</thead>", _section(page, "conditions"), re.S):
            cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<th[^>]*>(.*?)</th>", head, re.S)]
            assert cells and all(cells), (entry.id, cells)
            checked += 1
    assert checked > 20


# --- 6. Related ------------------------------------------------------------------------------------------


def test_related_entries_show_their_titles(kb, site: Path):
    shown = 0
    for entry in kb.entries.values():
        if not entry.related:
            continue
        related = _section(_page(site, entry.id), "related")
        for rel in entry.related:
            target = kb.entries[rel.id]
            here = f"entries/{entry.id}/"
            anchor = next((m for m in re.finditer(r'<a\s[^>]*?href="([^"]*)"[^>]*>((?:(?!</?a[\s>]).)*)</a>\s*<small>\(([^)]*)\)', related, re.S)
                           if site_path(here, m.group(1)) == f"entries/{rel.id}/"), None)
            assert anchor, (entry.id, rel.id)
            assert html.unescape(anchor.group(2)) == " ".join(target.title.split()), (entry.id, rel.id)
            assert anchor.group(3).startswith(rel.relation.value + ":")
            shown += 1
    assert shown > 50


# --- 7. References and entry ids in prose ----------------------------------------------------------------


def test_issue_references_become_links(kb, site: Path):
    page = _page(site, "cuda-out-of-memory")
    assert ('<a href="https://github.com/pytorch/pytorch/issues/173049" rel="noopener nofollow">'
            "pytorch/pytorch#173049</a>") in page
    linked = 0
    for entry in kb.entries.values():
        article = _page(site, entry.id).split("<article", 1)[1].split("</article>", 1)[0]
        prose = re.sub(r"<pre.*?</pre>|<code>.*?</code>|<a [^>]*>.*?</a>", "", article, flags=re.S)
        assert not re.search(r"(?<![\w/.-])[A-Za-z0-9][\w.-]*/[\w.-]+#\d+\b", prose), entry.id
        linked += len(re.findall(r'<a href="https://github\.com/[\w.-]+/[\w.-]+/issues/\d+" rel="noopener nofollow">', article))
    assert linked >= 15


@pytest.mark.parametrize("text, expected", [
    ("see pytorch/pytorch#173049.", '<a href="https://github.com/pytorch/pytorch/issues/173049" rel="noopener nofollow">'),
    ("(huggingface/transformers#1)", "https://github.com/huggingface/transformers/issues/1"),
])
def test_issue_reference_linked(text, expected):
    assert expected in safe_markdown(text)


@pytest.mark.parametrize("text", [
    "`pytorch/pytorch#1`",  # code stays code
    "https://example.org/a/b#12",  # part of an address
    "```\nowner/repo#3\n```",
    "a/b#x",
])
def test_issue_reference_left_alone(text):
    assert "<a " not in safe_markdown(text)


def test_issue_reference_stays_escaped():
    out = safe_markdown('x/y#1<script>alert(1)</script> "><b>')
    assert "<script" not in out and "<b>" not in out and "&lt;script&gt;" in out
    assert '<a href="https://github.com/x/y/issues/1" rel="noopener nofollow">x/y#1</a>' in out


def test_entry_ids_in_prose_link_to_their_entries():
    known = {"nccl-watchdog-timeout", "cuda-out-of-memory"}
    out = safe_markdown("First `nccl-watchdog-timeout`, not `no-such-entry`, not ``cuda-out-of-memory``.", known)
    assert "[`nccl-watchdog-timeout`](nccl-watchdog-timeout.md)" in out
    assert "`no-such-entry`" in out and "(no-such-entry.md)" not in out
    assert "(cuda-out-of-memory.md)" not in out  # only a plain one-backtick span names an entry


# --- 8 and 11. The home page -----------------------------------------------------------------------------


def test_home_page_says_what_is_new(kb):
    from packaging.version import Version

    page = home_page(kb)
    newest = max(Version(e.since) for e in kb.entries.values())
    section = page.split(f"## New in {newest}\n", 1)[1].split("\n## ", 1)[0].split("\nBrowse ", 1)[0]
    listed = re.findall(r"\(entries/([a-z0-9-]+)\.md\)", section)
    want = {e.id for e in kb.entries.values() if Version(e.since) == newest}
    assert sorted(listed) == sorted(want) and len(listed) == len(set(listed))
    assert "since " not in section
    assert "Recently added" not in page


def test_home_page_install_command_works_as_written(kb, site: Path):
    from denpex_kb.bundle import KbIndex
    from denpex_kb.compiler import compile_kb
    from denpex_kb.matcher import match

    repo_url = re.search(r"^repo_url: (\S+)$", (REPO / "mkdocs.yml").read_text(encoding="utf-8"), re.M).group(1)
    assert INSTALL == f"pip install git+{repo_url}" == f"pip install git+{REPO_URL}"
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^name = "denpex-kb"$', pyproject, re.M)
    home = html.unescape(re.sub(r"<[^>]+>", "", (site / "index.html").read_text(encoding="utf-8")))
    block = home.split(INSTALL, 1)[1].split("denpex-kb scan", 1)[0]
    assert not re.search(r"pip install denpex-kb\b", home)  # not on an index yet
    line = re.search(r'denpex-kb match "([^"]+)"', block).group(1)
    compiled, full = compile_kb(kb)
    assert match(line, index=KbIndex(compiled, lambda: full, str(KB)))[0].id == "cuda-out-of-memory"


# --- 9. The repository widget ----------------------------------------------------------------------------


def test_repository_widget_is_static(site: Path):
    for page in [site / "index.html", site / "404.html", site / "entries" / "cuda-out-of-memory" / "index.html"]:
        text = page.read_text(encoding="utf-8")
        assert 'class="md-source"' in text
        assert 'data-md-component="source"' not in text, page


# --- In Chromium ------------------------------------------------------------------------------------------


@contextlib.contextmanager
def serve_with_404(root: Path, prefix: str = "/") -> Iterator[str]:
    """The built site under `prefix`, answering a missing path with 404.html as GitHub Pages does."""

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def translate_path(self, path: str) -> str:
            if not path.startswith(prefix):
                return str(root / "no such file")
            return super().translate_path("/" + path[len(prefix):])

        def send_head(self):  # type: ignore[no-untyped-def]
            target = Path(self.translate_path(self.path.split("?", 1)[0]))
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                body = (root / "404.html").read_bytes()
                self.send_response(404)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return None
            return super().send_head()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{prefix}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def browser(site: Path):
    chromium = chromium_or_skip()
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=chromium, args=ARGS)
        yield launched
        launched.close()


def _shot(page, name: str) -> None:
    shots = OUTPUT / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / name))


_HIDDEN_UNDER_BUTTON = r"""() => {
  const hidden = [];
  for (const pre of document.querySelectorAll("article pre")) {
    const button = pre.querySelector("button");
    const code = pre.querySelector("code");
    if (!button || !code || button.offsetParent === null) continue;
    const b = button.getBoundingClientRect();
    if (code.scrollWidth > code.clientWidth + 1) hidden.push("scrolls: " + code.textContent.slice(0, 40));
    // Every run of visible characters (a space that hangs at a wrap hides nothing).
    const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    const range = document.createRange();
    let covered = null;
    for (let node = walker.nextNode(); node && !covered; node = walker.nextNode()) {
      for (const word of node.data.matchAll(/\S+/g)) {
        range.setStart(node, word.index);
        range.setEnd(node, word.index + word[0].length);
        for (const r of range.getClientRects()) {
          if (r.left < b.right && r.right > b.left && r.top < b.bottom && r.bottom > b.top) covered = word[0];
        }
        if (covered) break;
      }
    }
    if (covered) hidden.push("under the button: " + covered);
  }
  return hidden;
}"""


@pytest.mark.browser
@pytest.mark.parametrize("width", [1280, 390])
def test_browser_copy_button_hides_no_code(site: Path, browser, width: int):
    with serve_with_404(site) as base:
        page = browser.new_page(viewport={"width": width, "height": 900})
        for rel in ("entries/cuda-out-of-memory/", "entries/nccl-watchdog-timeout/"):
            page.goto(base + rel)
            page.wait_for_selector("article pre button", state="attached")
            assert page.evaluate(_HIDDEN_UNDER_BUTTON) == [], (rel, width)
        _shot(page, f"code-{width}.png")
        page.close()


_TABLE_ON_A_PHONE = """() => {
  const table = document.querySelector("article table");
  const box = table.closest(".md-typeset__scrollwrap");
  const broken = [...table.querySelectorAll("code")].filter(c => c.getClientRects().length > 1).map(c => c.textContent);
  box.scrollLeft = box.scrollWidth;
  const last = table.querySelector("thead th:last-child").getBoundingClientRect();
  return {broken, scrolls: getComputedStyle(box).overflowX, wide: box.scrollWidth > box.clientWidth,
          lastVisible: last.right <= window.innerWidth + 1 && last.left >= 0,
          page: document.documentElement.scrollWidth <= window.innerWidth};
}"""


@pytest.mark.browser
def test_browser_phase_table_scrolls_on_a_phone(site: Path, browser):
    with serve_with_404(site) as base:
        page = browser.new_page(viewport={"width": 390, "height": 844})
        for rel in ("phases/communication/", "phases/forward/", "entries/"):
            page.goto(base + rel)
            _shot(page, f"table-{rel.strip('/').replace('/', '-')}-phone.png")
            got = page.evaluate(_TABLE_ON_A_PHONE)
            assert got["broken"] == [], (rel, got["broken"][:3])
            assert got["scrolls"] in ("auto", "scroll") and got["wide"], (rel, got)
            assert got["lastVisible"] and got["page"], (rel, got)
        page.close()


def _styled(page) -> bool:
    return page.evaluate("""() => [...document.styleSheets].some(s => s.href && /main\\.[0-9a-f]+\\.min\\.css$/.test(s.href)
        && s.cssRules.length > 100) && getComputedStyle(document.querySelector(".md-header")).position === "sticky" """)


@pytest.mark.browser
def test_browser_404_page_is_styled_from_any_path(site: Path, browser):
    with serve_with_404(site) as base:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        response = page.goto(base + "entries/no/such/deep/path/")
        assert response is not None and response.status == 404
        assert _styled(page), "the 404 page's stylesheet did not load"
        _shot(page, "404-desktop.png")
        home = page.get_attribute("article a[href='.']", "href")
        assert home is not None and page.evaluate("new URL('.', document.baseURI).href") == base
        page.click("article a[href='entries/']")
        page.wait_for_selector("#dkb-entries-filter")
        assert page.url == base + "entries/"
        assert [u for u in requests if not u.startswith(base)] == []
        page.close()
    # Where the site is published (under site_url's path), it works without script too.
    with serve_with_404(site, "/denpex-kb/") as base:
        context = browser.new_context(java_script_enabled=False)
        page = context.new_page()
        response = page.goto(base + "phases/x/y/z")
        assert response is not None and response.status == 404
        assert page.evaluate("document.styleSheets.length") >= 1  # evaluate still runs with page scripts off
        assert page.evaluate("[...document.styleSheets].some(s => s.href && s.href.startsWith(location.origin + '/denpex-kb/assets/') && s.cssRules.length > 100)")
        context.close()


@pytest.mark.browser
def test_browser_no_request_leaves_the_site(site: Path, browser):
    with serve_with_404(site) as base:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        for rel in ("", "entries/cuda-out-of-memory/", "phases/communication/", "tags/", "match/", "missing/page/"):
            page.goto(base + rel)
            page.wait_for_load_state("networkidle")
        assert requests and [u for u in requests if not u.startswith(base)] == []
        page.close()
