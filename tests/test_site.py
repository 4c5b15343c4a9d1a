"""The failure hub: a strict build of the whole knowledge base, hostile entries made inert, and a real browser."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from conftest import KB, REPO, chromium_or_skip, links, serve_directory, variant
from denpex_kb.loader import load_kb
from denpex_kb.model import Phase
from denpex_kb.site import search
from denpex_kb.site.build import build_site
from denpex_kb.site.render import to_markdown, to_terminal

OUTPUT = REPO / "tests" / "output"


@pytest.fixture(scope="module")
def built_site(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hub")
    kb = load_kb(KB)
    build_site(kb, REPO / "mkdocs.yml", root / "docs", root / "site")
    return root / "site"


def test_every_entry_has_a_page_and_sits_on_its_phase_index(built_site: Path):
    kb = load_kb(KB)
    for entry in kb.entries.values():
        page = built_site / "entries" / entry.id / "index.html"
        assert page.is_file(), entry.id
        text = page.read_text(encoding="utf-8")
        assert f'data-entry-id="{entry.id}"' in text, f"{entry.id}: no metadata header"
        phase_index = (built_site / "phases" / entry.phase.value / "index.html").read_text(encoding="utf-8")
        assert f"../../entries/{entry.id}/" in phase_index, f"{entry.id} missing from its phase index"
    for phase in Phase:
        assert (built_site / "phases" / phase.value / "index.html").is_file()


def test_entry_pages_stay_out_of_the_sidebar(built_site: Path):
    home = (built_site / "index.html").read_text(encoding="utf-8")
    nav = re.split(r'class="md-nav md-nav--primary[^"]*"', home, maxsplit=1)[1].split("</nav>", 1)[0]
    # The all-entries page (entries/) is in the nav; no entry page (entries/<id>/) is.
    assert not re.search(r"entries/[a-z0-9-]+/", nav)
    assert "entries/" in [target for target, _ in links(home, "")]


def test_search_index_holds_the_signature_text(built_site: Path):
    index = (built_site / "search" / "search_index.json").read_text(encoding="utf-8")
    assert "Watchdog caught collective operation timeout" in index


def test_search_index_weighs_what_the_software_prints(built_site: Path):
    """The build (its post-build hook) rewrites the theme's weights: tags and titles no longer outweigh the
    text by a million and a thousand, an entry's printed lines weigh more than its prose, its benign
    look-alikes and the listing pages less."""
    index = json.loads((built_site / "search" / "search_index.json").read_text(encoding="utf-8"))
    assert {k: v["boost"] for k, v in index["config"]["fields"].items()} == search.FIELD_BOOST
    boosts = {d["location"]: d.get("boost") for d in index["docs"]}
    entry = "entries/nccl-watchdog-timeout/"
    assert boosts[entry + "#real-output"] == search.SECTION_BOOST["real-output"]
    assert boosts[entry + "#signatures"] > 1 > boosts[entry + "#not-this-failure"]
    assert boosts[entry + "#causes"] is None and boosts[entry] is None  # plain text weighs 1
    assert boosts["phases/communication/"] == search.LISTING_BOOST


def test_weigh_leaves_other_pages_and_fields_alone():
    index = {"config": {"fields": {"title": {"boost": 1000.0}, "text": {"boost": 1.0}}},
             "docs": [{"location": "verdict/", "text": "x"}, {"location": "entries/a-b/#signatures", "text": "y"},
                      {"location": "entries/a-b/sub/#signatures", "text": "z"}]}
    out = search.weigh(index)
    assert out["config"]["fields"] == {"title": {"boost": search.FIELD_BOOST["title"]}, "text": {"boost": 1.0}}
    assert [d.get("boost") for d in out["docs"]] == [None, search.SECTION_BOOST["signatures"], None]


def test_explain_and_page_come_from_one_renderer():
    kb = load_kb(KB)
    entry = kb.entries["cuda-out-of-memory"]
    page, term = to_markdown(entry), to_terminal(entry, width=100)
    assert entry.fix.summary in page and entry.fix.summary.split()[0] in term
    for heading in ("Symptoms", "Causes", "Checklist", "Fix"):
        assert f"## {heading}" in page and heading.upper() in term


HOSTILE = "<script>alert(1)</script> <img src=x onerror=alert(2)> [click](javascript:alert(3)) {: onclick=alert(4) }"


def hostile_entry() -> str:
    text = variant(("id: demo-device-mismatch", "id: hostile-entry"))
    for field in ("title: ", "summary: "):
        text = re.sub(rf"^{field}.*$", f"{field}{HOSTILE!r}".replace("'", "'"), text, flags=re.M)
    quoted = "'" + HOSTILE + "'"
    text = text.replace("  - The first forward pass raises a RuntimeError.", f"  - {quoted}")
    text = text.replace("  - A tensor was created on the CPU while the model was moved to a GPU.", f"  - {quoted}")
    text = text.replace("  - The message names two devices.", f"  - {quoted}")
    text = text.replace("  body: Call `.to(device)` on each input tensor.", f"  body: {quoted}\n  variants:\n    - framework: deepspeed\n      body: {quoted}")
    text = text.replace("      note: a log line that only mentions devices", f"      note: {quoted}")
    text += (
        "commands:\n  - purpose: verify\n    description: " + quoted + "\n    run: " + quoted + "\n"
        "references:\n  - url: https://example.org/a?b=<script>\n    title: " + quoted + "\n"
        "conditions:\n  notes: [" + quoted + "]\n  scale: " + quoted + "\n  hardware: " + quoted + "\n"
    )
    return text


def test_hostile_entry_is_inert(make_kb, tmp_path: Path):
    root = make_kb({"hostile-entry.yaml": hostile_entry()})
    kb = load_kb(root)
    assert not kb.problems, [p.render() for p in kb.problems]
    site = tmp_path / "site"
    build_site(kb, REPO / "mkdocs.yml", tmp_path / "docs", site)
    page = (site / "entries" / "hostile-entry" / "index.html").read_text(encoding="utf-8")
    content = page.split('<article class="md-content__inner', 1)[1].split("</article>", 1)[0]
    assert "<script" not in content.lower()
    assert not re.search(r"<[^>]+\son\w+\s*=", content, re.I), "an inline event handler reached the page"
    assert "javascript:" not in re.sub(r"&[a-z]+;|&#\d+;", "", " ".join(re.findall(r'href="([^"]*)"', content))).lower()
    for href in re.findall(r'href="([^"]*)"', content):
        assert not html.unescape(href).lower().startswith("javascript:")
    for anchor in re.findall(r"<a [^>]*href=\"https?://[^>]*>", content):
        assert 'rel="noopener' in anchor, anchor
    assert "&lt;script&gt;" in content  # the text is shown, as text


@pytest.mark.browser
def test_browser_home_phase_entry_and_search(built_site: Path):
    chromium = chromium_or_skip()
    sync_api = pytest.importorskip("playwright.sync_api")
    shots = OUTPUT / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"]
    with serve_directory(built_site) as base, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=args)
        for label, viewport in (("desktop", {"width": 1280, "height": 900}), ("phone", {"width": 390, "height": 844})):
            page = browser.new_page(viewport=viewport)
            page.goto(base)
            assert "failure hub" in page.title().lower()
            page.screenshot(path=str(shots / f"home-{label}.png"), full_page=False)
            page.goto(base + "phases/communication/")
            page.screenshot(path=str(shots / f"phase-{label}.png"))
            page.click("a[href*='entries/nccl-watchdog-timeout/']")
            page.wait_for_selector(".dkb-entry-header")
            assert page.get_attribute(".dkb-entry-header", "data-entry-id") == "nccl-watchdog-timeout"
            page.screenshot(path=str(shots / f"entry-{label}.png"))
            page.close()
        # Paste an entry's signature into search; the entry must be among the results.
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(base)
        page.fill(".md-search__input", "Watchdog caught collective operation timeout")
        page.wait_for_selector(".md-search-result__item", timeout=60000)  # the worker indexes the site first
        results = page.inner_html(".md-search-result__list")
        assert "entries/nccl-watchdog-timeout/" in results
        page.screenshot(path=str(shots / "search-desktop.png"))
        page.close()
        # The same on a phone, as a phone presents itself (touch, mobile layout): the search opens from the header
        # and must answer, not stay at "Type to start searching".
        context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True,
                                      device_scale_factor=3)
        page = context.new_page()
        page.goto(base + "entries/cuda-out-of-memory/")
        page.tap("label.md-header__button[for='__search']")
        page.fill(".md-search__input", "Tried to allocate")
        page.wait_for_selector(".md-search-result__item", timeout=60000)
        first = page.get_attribute(".md-search-result__item a", "href") or ""
        assert "cuda-out-of-memory" in first, page.inner_html(".md-search-result__list")[:500]
        page.screenshot(path=str(shots / "search-phone.png"))
        context.close()
        browser.close()


def test_retired_id_redirects_to_its_replacement(make_kb, tmp_path: Path):
    stone = (
        "# yaml-language-server: $schema=../schema/entry.schema.json\n"
        "id: old-device-error\ntitle: Old device entry\nstatus: removed\nsince: 0.1.0\n"
        "replaced_by: demo-device-mismatch\nreason: merged into demo-device-mismatch\n"
    )
    kb = load_kb(make_kb({"old-device-error.yaml": stone}))
    site = tmp_path / "site"
    build_site(kb, REPO / "mkdocs.yml", tmp_path / "docs", site)
    redirect = (site / "entries" / "old-device-error" / "index.html").read_text(encoding="utf-8")
    assert "demo-device-mismatch" in redirect and "refresh" in redirect.lower()


def test_verdict_page_lists_the_exit_codes_of_the_library(built_site: Path):
    from denpex_kb.commands.recipe import recipes
    from denpex_kb.verdict import EXIT_CODES

    page = (built_site / "verdict" / "index.html").read_text(encoding="utf-8")
    for code in set(EXIT_CODES.values()):
        assert f"<td>{code}</td>" in page, code
    for name in recipes():
        assert f"denpex-kb recipe {name}" in page


def test_a_strict_build_that_aborts_says_why(make_kb, tmp_path: Path):
    from denpex_kb.site.build import SiteBuildError

    config = tmp_path / "mkdocs.yml"
    text = (REPO / "mkdocs.yml").read_text(encoding="utf-8").replace("  - Tags: tags.md\n", "  - Tags: tags.md\n  - Gone: no-such-page.md\n")
    assert "no-such-page.md" in text
    config.write_text(text.replace("denpex_kb/site/hooks.py", str(REPO / "denpex_kb" / "site" / "hooks.py")), encoding="utf-8")
    (tmp_path / "site_overrides").symlink_to(REPO / "site_overrides")
    with pytest.raises(SiteBuildError) as caught:
        build_site(load_kb(make_kb()), config, tmp_path / "docs", tmp_path / "site")
    assert "no-such-page.md" in str(caught.value)
