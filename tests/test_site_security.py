"""Hostile entry text never becomes live script in the hub: built pages parsed back, and loaded in a real browser.

Each payload below once reached a built page as a live `javascript:` link, an event handler or a script
(through the theme's unescaped `page.meta.*`, or a corner of Markdown that the Markdown rewriter missed).
"""

from __future__ import annotations

import html.parser
import json
import re
import shutil
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from conftest import GOOD_ENTRY, REPO, chromium_or_skip, serve_directory
from denpex_kb.loader import load_kb
from denpex_kb.site.audit import audit_html
from denpex_kb.site.build import UnsafeSiteError, build_site

PAYLOADS = {
    "meta-break-out": '"><script>alert(1)</script>',
    "nested-label": "[a [b]](javascript:alert(2))",
    "long-label": "[" + "x" * 320 + "](javascript:alert(3))",
    "label-newline": "[a\nb](javascript:alert(4))",
    "code-span-across-blank": "`a\n\n<img src=x onerror=alert(5)>`",
    "fence-backtick-info": "```a`b\n<img src=x onerror=alert(6)>\n```",
    "fence-indented-4": "    ```\n<img src=x onerror=alert(7)>\n    ```",
    "fence-in-list": "- item\n\n    ```\n    x\n    ```\n<img src=x onerror=alert(8)>",
    "mixed-case-scheme": "[x](JaVaScRiPt:alert(9))",
    "entity-in-scheme": '<a href="jav&#x09;ascript:alert(10)">x</a>',
    "image": "![i](javascript:alert(11))",
    "reference-link": "[x][r]\n\n[r]: javascript:alert(12)",
    "autolink": "<javascript:alert(13)>",
    "data-url": "[d](data:text/html;base64,PHNjcmlwdD5hbGVydCgxNCk8L3NjcmlwdD4=)",
    "svg": "<svg onload=alert(15)>",
    "attr-list": "text {: onclick=alert(16) }",
    "clobber": '<div id="__config">{"search": "x"}</div>',
}


def _one_line(text: str) -> str:
    return " ".join(text.split())


def hostile_entry(key: str, payload: str) -> str:
    doc = YAML(typ="safe").load(GOOD_ENTRY)
    line = _one_line(payload)
    doc["id"] = f"hostile-{key}"
    doc["title"] = ("T " + line)[:120]
    doc["summary"] = ("A hostile summary: " + line)[:600]
    doc["symptoms"] = [payload]
    doc["causes"] = [payload]
    doc["checklist"] = [payload]
    doc["fix"] = {"summary": ("Fix it " + line)[:240], "body": payload,
                  "variants": [{"framework": "deepspeed", "body": payload}]}
    doc["response"] = {"retry": "no", "blame": "code"}
    doc["commands"] = [{"purpose": "verify", "description": payload, "run": payload}]
    doc["references"] = [{"url": "https://example.org/a?b=<script>", "title": line}]
    doc["conditions"] = {"notes": [payload], "scale": line, "hardware": line}
    doc["signatures"][0]["note"] = line
    doc["examples"]["no_match"][0]["note"] = payload
    return json.dumps(doc)  # JSON is YAML


def write_hostile_kb(kb_dir: Path) -> Path:
    """A knowledge base of the reference entry and one entry per payload, every field of it hostile."""
    kb_dir.mkdir()
    shutil.copy(REPO / "kb" / "_tags.yaml", kb_dir / "_tags.yaml")
    (kb_dir / "demo-device-mismatch.yaml").write_text(GOOD_ENTRY, encoding="utf-8")
    for key, payload in PAYLOADS.items():
        (kb_dir / f"hostile-{key}.yaml").write_text(hostile_entry(key, payload), encoding="utf-8")
    return kb_dir


@pytest.fixture(scope="module")
def hostile_site(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    kb = load_kb(write_hostile_kb(root / "kb"))
    errors = [p.render() for p in kb.problems if p.severity.value == "error"]
    assert not errors, errors
    assert len(kb.entries) == len(PAYLOADS) + 1
    build_site(kb, REPO / "mkdocs.yml", root / "docs", root / "site")
    return root / "site"


class _Live(html.parser.HTMLParser):
    """Independent of the site audit: every place where a payload could execute, as the parser sees it."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self.script: list[str] | None = None
        self.article = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.article += tag == "article"
        for name, value in attrs:
            value = value or ""
            if name.startswith("on"):
                self.found.append(f"<{tag} {name}={value!r}>")
            squeezed = re.sub(r"[\x00-\x20]", "", value).lower()
            if squeezed.startswith(("javascript:", "data:", "vbscript:")):
                self.found.append(f"<{tag} {name}={value!r}>")
            if name == "id" and value.startswith("__config") and tag != "script":
                self.found.append(f"<{tag} id={value!r}> clobbers the theme's config")
        if tag in ("iframe", "object", "embed") or (self.article and tag in ("svg", "script")):
            self.found.append(f"<{tag}>")
        if tag == "script":
            self.script = []

    def handle_data(self, data: str) -> None:
        if self.script is not None:
            self.script.append(data)

    def handle_endtag(self, tag: str) -> None:
        self.article -= tag == "article" and self.article > 0
        if tag == "script" and self.script is not None:
            body = "".join(self.script)
            if "alert(" in body:
                self.found.append(f"<script>{body[:80]}")
            self.script = None


def test_no_built_page_holds_live_payload(hostile_site: Path):
    pages = sorted(hostile_site.rglob("*.html"))
    assert len(pages) > len(PAYLOADS)
    for page in pages:
        parser = _Live()
        parser.feed(page.read_text(encoding="utf-8"))
        assert parser.found == [], f"{page.relative_to(hostile_site)}: {parser.found[:5]}"


def test_payload_text_is_shown_as_text(hostile_site: Path):
    page = (hostile_site / "entries" / "hostile-meta-break-out" / "index.html").read_text(encoding="utf-8")
    title = re.search(r"<title>(.*?)</title>", page, re.S).group(1)
    assert "&lt;script&gt;" in title or "&#x27;&lt;script" in title, title
    description = re.search(r'<meta name="description" content="([^"]*)"', page).group(1)
    assert "&lt;script&gt;" in description and "&quot;&gt;" in description, description
    article = page.split("<article", 1)[1].split("</article>", 1)[0]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in article


def test_search_index_and_tags_page_hold_no_markup(hostile_site: Path):
    index = json.loads((hostile_site / "search" / "search_index.json").read_text(encoding="utf-8"))
    for doc in index["docs"]:
        for field in ("title", "text"):
            parser = _Live()
            parser.feed(doc.get(field, ""))
            assert parser.found == [], (doc["location"], field, parser.found)
            assert "<script" not in doc.get(field, "").lower(), (doc["location"], field)


def test_without_the_sanitizer_the_build_refuses(monkeypatch, tmp_path: Path):
    # The allow-list is what stops these payloads; with it switched off, the post-build audit must refuse the site.
    monkeypatch.setattr("denpex_kb.site.clean.clean_html", lambda fragment: fragment)
    kb_dir = tmp_path / "kb"
    kb_dir.mkdir()
    shutil.copy(REPO / "kb" / "_tags.yaml", kb_dir / "_tags.yaml")
    for key in ("nested-label", "code-span-across-blank", "fence-indented-4"):
        (kb_dir / f"hostile-{key}.yaml").write_text(hostile_entry(key, PAYLOADS[key]), encoding="utf-8")
    with pytest.raises(UnsafeSiteError) as caught:
        build_site(load_kb(kb_dir), REPO / "mkdocs.yml", tmp_path / "docs", tmp_path / "site")
    assert any("entries/hostile-" in p.path for p in caught.value.problems)


@pytest.mark.parametrize(
    "fragment, expected",
    [
        ('<article><a href="java\tscript:alert(1)">x</a></article>', "javascript: URL"),
        ("<article><img src=x onerror=alert(1)></article>", "event handler"),
        ("<article><script>x()</script></article>", "<script> inside the page body"),
        ('<script src="https://evil.example/x.js"></script>', "another site"),
        ("<script>alert(1)</script>", "dialog"),
    ],
)
def test_site_audit_catches_each_class(fragment: str, expected: str):
    problems = audit_html(fragment)
    assert problems and expected in problems[0].message, problems


def test_site_audit_accepts_the_theme(tmp_path: Path, make_kb):
    site = tmp_path / "site"
    build_site(load_kb(make_kb()), REPO / "mkdocs.yml", tmp_path / "docs", site)  # raises if the audit objects
    assert (site / "entries" / "demo-device-mismatch" / "index.html").exists()


@pytest.mark.browser
def test_no_dialog_fires_in_a_real_browser(hostile_site: Path):
    chromium = chromium_or_skip()
    sync_api = pytest.importorskip("playwright.sync_api")

    dialogs: list[str] = []
    pages = ["", "tags/"] + [f"entries/hostile-{key}/" for key in PAYLOADS] + ["phases/forward/"]
    with serve_directory(hostile_site) as base, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        page.on("dialog", lambda d: (dialogs.append(f"{page.url}: {d.message}"), d.dismiss()))
        for rel in pages:
            page.goto(base + rel)
            page.wait_for_load_state("load")
            # Click every link of the body: a javascript: href would run here.
            for anchor in page.query_selector_all("article a[href]"):
                href = anchor.get_attribute("href") or ""
                assert not re.sub(r"[\x00-\x20]", "", href).lower().startswith(("javascript:", "data:")), href
            page.wait_for_timeout(50)
        browser.close()
    assert dialogs == []


@pytest.mark.parametrize("key", ["fence-indented-4", "code-span-across-blank", "fence-backtick-info", "nested-label"])
def test_link_labels_are_text_whatever_the_builder(key: str):
    """A title becomes a link label or a table cell as text alone: a code span in it (whose backticks the label
    must escape) cannot leave its content as live HTML for a builder that runs no sanitizer after Markdown."""
    from denpex_kb.site.sanitize import safe_label

    label = safe_label("T " + _one_line(PAYLOADS[key]))
    assert "<" not in label and "`" not in label and "[" not in label and "]" not in label, label


def test_link_labels_keep_dunder_names_and_stars_as_text():
    """`__main__` and `*args` in a title are names, not emphasis, wherever the title becomes a label."""
    import html as html_module

    import markdown

    from denpex_kb.site.sanitize import safe_label

    title = "Can't get attribute on <module '__main__'> / *args **kwargs"
    rendered = markdown.markdown(f"[{safe_label(title)}](x/)")
    assert "<strong>" not in rendered and "<em>" not in rendered, rendered
    assert html_module.unescape(re.sub(r"<[^>]+>", "", rendered)) == title
