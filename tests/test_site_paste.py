"""The hub's all-entries page, prev/next links, and the paste box: `denpex-kb match` run in the browser.

The paste box must agree with the Python matcher, all four tiers of it (exact, normalized, fuzzy, exception
evidence): every entry's match examples, no_match examples, every benign-corpus line, and lines constructed so
that only the fuzzy and evidence tiers name them go through both; the page's top answer and its tier must be
Python's for each, and no benign line may get an answer. The fuzzy tier's scorer (rapidfuzz's
partial_ratio_alignment) is held equal to rapidfuzz's, score and alignment, on thousands of string pairs.
"""

from __future__ import annotations

import gzip
import json
import re
import textwrap
from pathlib import Path

import pytest

from conftest import KB, REPO, chromium_or_skip, links, serve_directory, site_path
from denpex_kb.bundle import KbIndex
from denpex_kb.compiler import compile_fuzzy, compile_kb
from denpex_kb.loader import load_kb
from denpex_kb.matcher import match
from denpex_kb.model import Phase
from denpex_kb.normalize import strip_prefixes
from denpex_kb.site.build import build_site
from denpex_kb.site.export import Untranslatable, re2_to_js

OUTPUT = REPO / "tests" / "output"
BENIGN = REPO / "tests" / "corpus" / "benign"
SCRIPT = REPO / "site_overrides" / "assets" / "dkb.js"
MAX_EXTRA_GZ = 300 * 1024


@pytest.fixture(scope="module")
def kb():
    return load_kb(KB)


@pytest.fixture(scope="module")
def index(kb) -> KbIndex:
    # With the fuzzy tier's data, as `denpex-kb match` has it: the page runs that tier too.
    compiled, full = compile_kb(kb)
    fuzzy = compile_fuzzy(kb) | {"digest": compiled["digest"]}
    return KbIndex(compiled, lambda: full, str(KB), lambda: fuzzy)


@pytest.fixture(scope="module")
def site(kb, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hub-paste")
    build_site(kb, REPO / "mkdocs.yml", root / "docs", root / "site")
    return root / "site"


def _cells(html_text: str) -> list[list[str]]:
    body = html_text.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return [[re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)]


# --- Static checks ---------------------------------------------------------------------------------------


def test_entries_page_lists_every_entry_with_its_response(kb, site: Path):
    text = (site / "entries" / "index.html").read_text(encoding="utf-8")
    rows = {r[0]: r for r in _cells(text)}
    assert set(rows) == set(kb.entries), "the all-entries table and the knowledge base differ"
    targets = {target for target, _ in links(text, "entries/")}
    for entry in kb.entries.values():
        row = rows[entry.id]
        assert f"entries/{entry.id}/" in targets, f"{entry.id}: title not linked to its page"
        retry = entry.response.retry.value if entry.response else "\u2014"
        blame = entry.response.blame.value if entry.response else "\u2014"
        assert row[5:7] == [retry, blame], (entry.id, row)
        assert row[4] == entry.severity.value
    assert 'id="dkb-entries-filter"' in text


def test_entries_page_title_cannot_break_the_table(make_kb, tmp_path: Path):
    from denpex_kb.site.build import entries_page

    root = make_kb()
    entry_file = root / "demo-device-mismatch.yaml"
    entry_file.write_text(entry_file.read_text().replace("title: Tensors on different devices",
                                                         "title: 'Pipes | and `ticks` [x](y) <b>'"))
    page = entries_page(load_kb(root))
    row = next(line for line in page.splitlines() if line.startswith("| `demo-device-mismatch`"))
    assert row.count("|") == 8, row  # seven cells: no title character made a new one
    assert "`ticks`" not in row and "<b>" not in row


def test_entry_pages_link_previous_and_next_in_their_phase(kb, site: Path):
    for phase in Phase:
        same = sorted((e for e in kb.entries.values() if e.phase is phase), key=lambda e: (e.title.lower(), e.id))
        for i, entry in enumerate(same):
            text = (site / "entries" / entry.id / "index.html").read_text(encoding="utf-8")

            def after(label: str, text: str = text, here: str = f"entries/{entry.id}/") -> str | None:
                m = re.search(rf'{label} in [^<]*<a\s[^>]*?href="([^"]*)"', text)
                return site_path(here, m.group(1)) if m else None

            if i > 0:
                assert after("Previous") == f"entries/{same[i - 1].id}/", entry.id
            else:
                assert "Previous in" not in text, entry.id
            if i + 1 < len(same):
                assert after("Next") == f"entries/{same[i + 1].id}/", entry.id
            else:
                assert "Next in" not in text, entry.id


def test_match_asset_is_complete_and_small(kb, index, site: Path):
    data = json.loads((site / "assets" / "dkb-match-index.json").read_text(encoding="utf-8"))
    assert len(data["signatures"]) + len(data["skipped"]) == len(index.signatures)
    assert data["skipped"] == [], data["skipped"]  # every signature of today's KB translates
    assert {e["id"] for e in data["entries"]} == set(kb.entries)
    raw = (site / "assets" / "dkb-match-index.json").read_bytes()
    assert b"<" not in raw and b">" not in raw  # inert even if ever inlined
    weight = sum(len(gzip.compress((site / "assets" / f).read_bytes(), 9)) for f in ("dkb-match-index.json", "dkb.js"))
    print(f"paste box weight: {weight} bytes gzipped")
    assert weight <= MAX_EXTRA_GZ


def test_script_writes_no_html_and_calls_no_other_site():
    source = SCRIPT.read_text(encoding="utf-8")
    for bad in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function",
                "XMLHttpRequest", "sendBeacon", "WebSocket", "localStorage", "http://", "https://"):
        assert bad not in source, bad
    assert source.count("fetch(") == 1 and 'fetch(new URL("dkb-match-index.json", base)' in source


def test_pages_load_the_script_as_a_file_of_the_site(site: Path):
    for rel in ("index.html", "match/index.html", "entries/index.html"):
        text = (site / rel).read_text(encoding="utf-8")
        assert re.search(r'<script src="(?:\.\./)*assets/dkb\.js"></script>', text), rel
        content = text.split('<article class="md-content__inner', 1)[1].split("</article>", 1)[0]
        assert "<script" not in content and "<textarea" not in content  # the script adds the box at run time


@pytest.mark.parametrize("pattern, js", [
    (r"(?P<size>\d+) MiB", r"(?<size>\d+) MiB"),
    (r"\Afoo\z", r"^foo$"),
    (r"[[:digit:]]+", r"[0-9]+"),
    (r"[]a]", r"[\]a]"),
    (r"a\ b", r"a\ b"),
    (r"\x{41}", r"\u0041"),
])
def test_re2_to_js(pattern, js):
    assert re2_to_js(pattern) == js


@pytest.mark.parametrize("pattern", [r"(?i)oom", r"\pL+", r"\C", r"\Qa.b\E", r"\x{1F600}"])
def test_re2_to_js_refuses_what_js_reads_otherwise(pattern):
    with pytest.raises(Untranslatable):
        re2_to_js(pattern)


# --- In Chromium ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser_page(site: Path):
    chromium = chromium_or_skip()
    sync_api = pytest.importorskip("playwright.sync_api")

    args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"]
    with serve_directory(site) as base, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=args)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        yield base, page, requests
        browser.close()


# Nothing may leave the site: the repository widget is static (site_overrides/partials/source.html).
def _elsewhere(requests: list[str], base: str) -> list[str]:
    return [u for u in requests if not u.startswith(base)]


def _visible_rows(page) -> dict[str, list[str]]:
    return {r[0]: r for r in page.eval_on_selector_all(
        "article table tbody tr",
        "rows => rows.filter(r => r.offsetParent !== null).map(r => Array.from(r.cells, c => c.textContent.trim()))",
    )}


@pytest.mark.browser
def test_browser_entries_page_lists_and_filters(kb, browser_page):
    base, page, requests = browser_page
    page.goto(base + "entries/")
    page.wait_for_selector("#dkb-entries-filter[data-ready=true]")
    rows = _visible_rows(page)
    assert set(rows) == set(kb.entries)
    for entry in kb.entries.values():
        retry = entry.response.retry.value if entry.response else "\u2014"
        blame = entry.response.blame.value if entry.response else "\u2014"
        assert rows[entry.id][5:7] == [retry, blame], entry.id
    page.select_option("select[name=retry]", "elsewhere")
    shown = set(_visible_rows(page))
    want = {e.id for e in kb.entries.values() if e.response and e.response.retry.value == "elsewhere"}
    assert want and shown == want
    assert page.inner_text(".dkb-filter__count").startswith(f"{len(want)} of {len(kb.entries)}")
    # Selects combine, and the text box narrows further.
    page.select_option("select[name=blame]", "node")
    both = {e.id for e in kb.entries.values() if e.response and (e.response.retry.value, e.response.blame.value) == ("elsewhere", "node")}
    assert set(_visible_rows(page)) == both
    page.select_option("select[name=blame]", "")
    page.select_option("select[name=retry]", "")
    page.fill(".dkb-filter__text", "nccl-watchdog")
    assert "nccl-watchdog-timeout" in _visible_rows(page)
    assert len(_visible_rows(page)) < len(kb.entries)
    shots = OUTPUT / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / "entries-desktop.png"))
    assert _elsewhere(requests, base) == []


def _cases(kb) -> list[tuple[str, str, str]]:
    cases = []
    for e in sorted(kb.entries.values(), key=lambda e: e.id):
        cases += [("example", e.id, ex.text) for ex in e.examples.match]
        cases += [("no_match", e.id, ex.text) for ex in e.examples.no_match]
    for log in sorted(BENIGN.glob("*.log")):
        cases += [("benign", log.name, line) for line in log.read_text(encoding="utf-8", errors="replace").splitlines()]
    return cases


_LONG_WORD = re.compile(r"[A-Za-z]{4,}")
_CLASS_AT_START = re.compile(r"\s*((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)):")


def _perturbed(kb) -> list[str]:
    """Constructed inputs for parity, not knowledge: each line of every entry's examples with one word dropped,
    one word added, or two words swapped (edits the paste normalizers do not undo), and the exception class of an
    example's first line alone. None of them is claimed to be something a program printed."""
    out = []
    for e in sorted(kb.entries.values(), key=lambda e: e.id):
        for ex in e.examples.match:
            for line in ex.text.splitlines():
                words = list(_LONG_WORD.finditer(line))
                if len(words) < 4:
                    continue
                mid, w1, w2 = words[len(words) // 2], words[1], words[2]
                out.append(line[:mid.start()] + line[mid.end():])
                out.append(line[:mid.start()] + "unexpectedly " + line[mid.start():])
                out.append(line[:w1.start()] + w2.group() + line[w1.end():w2.start()] + w1.group() + line[w2.end():])
            m = _CLASS_AT_START.match(ex.text.splitlines()[0]) if ex.text else None
            if m:
                out.append(m.group(1) + ":")
    return out


def _top(ranked) -> list | None:
    return [ranked[0].id, ranked[0].tier] if ranked else None


_PAGE_TOP = "texts => texts.map(t => { const r = window.denpexMatch(t); return r.length ? [r[0].id, r[0].tier] : null; })"


def _ready(page, base: str) -> dict:
    page.goto(base + "match/")
    page.wait_for_selector("#dkb-paste[data-ready=true]")
    return page.evaluate("window.denpexMatchInfo")


@pytest.mark.browser
def test_browser_paste_box_agrees_with_the_python_matcher(kb, index, browser_page):
    base, page, requests = browser_page
    info = _ready(page, base)
    assert info["broken"] == 0, info
    cases = _cases(kb)
    got = page.evaluate(_PAGE_TOP, [c[2] for c in cases])
    expected = [_top(match(text, index=index)) for _kind, _where, text in cases]
    report: dict[str, tuple[int, int]] = {}
    diffs = []
    for (kind, where, text), js, py in zip(cases, got, expected, strict=True):
        same, total = report.get(kind, (0, 0))
        report[kind] = (same + (js == py), total + 1)
        if js != py:
            diffs.append(f"{kind} {where}: python {py}, page {js}: {text[:100]!r}")
    summary = ", ".join(f"{k} {s}/{t}" for k, (s, t) in sorted(report.items()))
    tiers = {tier: sum(1 for py in expected if py and py[1] == tier) for tier in ("exact", "normalized", "fuzzy", "evidence")}
    print(f"paste box agreement (top answer and tier): {summary}; Python's tiers {tiers}; skipped {info['skipped']}")
    OUTPUT.mkdir(parents=True, exist_ok=True)
    (OUTPUT / "paste-agreement.txt").write_text(summary + "\n" + "\n".join(diffs) + "\n", encoding="utf-8")
    assert not diffs, "\n".join(diffs[:20])
    assert all(py is None for (kind, _w, _t), py in zip(cases, expected, strict=True) if kind == "benign")
    assert _elsewhere(requests, base) == []  # nothing pasted left the page


@pytest.mark.browser
def test_browser_paste_box_undoes_every_pasted_text_artifact_as_match_does(index, browser_page):
    """Each normalizer's unit cases and the pastes only the normalized pass reads (tests/test_paste.py): the page's
    replacements are written out by hand in dkb.js, so each one is held to Python's answer here."""
    from test_paste import NORMALIZED_CASES, UNITS

    base, page, _requests = browser_page
    _ready(page, base)
    texts = [pasted for _name, pasted, _printed in UNITS] + [pasted for pasted, _entry in NORMALIZED_CASES]
    got = page.evaluate(_PAGE_TOP, texts)
    expected = [_top(match(text, index=index)) for text in texts]
    diffs = [f"python {py}, page {js}: {text!r}" for text, js, py in zip(texts, got, expected, strict=True) if js != py]
    assert not diffs, "\n".join(diffs)
    assert sum(py is not None and py[1] == "normalized" for py in expected) >= len(NORMALIZED_CASES) - 2


def _wrapped(kb) -> list[str]:
    """Every example line longer than 100 columns as a 100-column terminal shows it (cut inside words) and as an
    editor wraps it at 80 (at spaces): the pastes the exact pass rebuilds (terminal runs, single cuts, joins)."""
    out = []
    for e in sorted(kb.entries.values(), key=lambda e: e.id):
        for ex in e.examples.match:
            for line in ex.text.splitlines():
                if len(line) > 100:
                    out.append("\n".join(line[i : i + 100] for i in range(0, len(line), 100)))
                    out.append("\n".join(textwrap.wrap(line, 80, break_long_words=False, break_on_hyphens=False)))
    return out


@pytest.mark.browser
def test_browser_paste_box_reads_wrapped_lines_as_match_does(kb, index, browser_page):
    """dkb.js writes out SoftWrap's terminal and single-cut readings by hand: held to Python's answers here."""
    base, page, _requests = browser_page
    _ready(page, base)
    texts = _wrapped(kb)
    got = page.evaluate(_PAGE_TOP, texts)
    expected = [_top(match(text, index=index)) for text in texts]
    diffs = [f"python {py}, page {js}: {text[:120]!r}" for text, js, py in zip(texts, got, expected, strict=True) if js != py]
    assert not diffs, "\n".join(diffs[:20])
    assert len(texts) > 1000


@pytest.mark.browser
def test_browser_paste_box_keeps_a_kernel_device_tag_as_match_does(index, browser_page):
    """After a kernel log's time stamp, `nvidia-nvswitch1: ` is a device tag kept in the text, not a host
    (normalize.NOT_AFTER, exported to the page): the NVSwitch driver's SXid line as dmesg prints it (gpud's SXid
    notes), alone, with a word dropped, and behind a pdsh host."""
    base, page, _requests = browser_page
    _ready(page, base)
    sxid = "[6781753.400584] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up"
    texts = [sxid, sxid.replace("Fatal,", ","), "node7: " + sxid]
    got = page.evaluate("texts => texts.map(t => { const r = window.denpexMatch(t); "
                        "return r.length ? [r[0].id, r[0].tier, r[0].text] : null; })", texts)
    expected = []
    for text in texts:
        ranked = match(text, index=index)
        expected.append([ranked[0].id, ranked[0].tier, ranked[0].text] if ranked else None)
    assert got == expected
    assert expected[0] is not None and expected[0][2].startswith("nvidia-nvswitch1: SXid")


@pytest.mark.browser
def test_browser_paste_box_runs_the_fuzzy_and_evidence_tiers_as_match_does(kb, index, browser_page):
    """Lines no signature matches, that only the fuzzy or the exception-evidence tier names (constructed from
    the examples, see `_perturbed`): the page must give each Python's top answer, tier and score, and say what
    known wording it is close to."""
    base, page, requests = browser_page
    _ready(page, base)
    lines, expected = [], []
    for text in _perturbed(kb):
        ranked = match(text, index=index)
        if ranked and ranked[0].tier in ("fuzzy", "evidence"):
            lines.append(text)
            expected.append([ranked[0].id, ranked[0].tier, ranked[0].score, ranked[0].signature])
    got = page.evaluate("texts => texts.map(t => { const r = window.denpexMatch(t); "
                        "return r.length ? [r[0].id, r[0].tier, r[0].score, r[0].signature] : null; })", lines)
    diffs = [f"python {py}, page {js}: {text[:100]!r}" for text, js, py in zip(lines, got, expected, strict=True) if js != py]
    fuzzy = sum(1 for py in expected if py[1] == "fuzzy")
    print(f"fuzzy/evidence parity: {len(lines) - len(diffs)}/{len(lines)} ({fuzzy} fuzzy, {len(lines) - fuzzy} evidence)")
    assert fuzzy > 500 and len(lines) - fuzzy > 5, (fuzzy, len(lines))
    assert not diffs, "\n".join(diffs[:20])
    # A fuzzy answer never outranks a signature hit: with a line an exact signature names in the same paste,
    # the exact answer comes first, in the page as in Python.
    exact = kb.entries["cuda-out-of-memory"].examples.match[0].text
    fuzzy_line = next(text for text, py in zip(lines, expected, strict=True) if py[1] == "fuzzy" and py[0] != "cuda-out-of-memory")
    both = fuzzy_line + "\n" + exact
    assert page.evaluate(_PAGE_TOP, [both])[0] == _top(match(both, index=index)) == ["cuda-out-of-memory", "exact"]
    # Shown as `denpex-kb match` shows it: the wording it is close to.
    page.fill("#dkb-paste-input", fuzzy_line)
    page.wait_for_selector("#dkb-paste[data-state=done]")
    shown = page.inner_text(".dkb-paste__result .dkb-paste__close")
    assert shown.startswith("close to: ") and match(fuzzy_line, index=index)[0].signature[:50] in shown
    assert "fuzzy" in page.inner_text(".dkb-paste__result .dkb-paste__chips")
    assert _elsewhere(requests, base) == []


def _pairs(index) -> list[tuple[str, str]]:
    """String pairs for the scorer: known wordings against edited copies and windows of them (long and short,
    equal lengths, characters outside the BMP), and random strings over small alphabets (many ties)."""
    import random

    rng = random.Random(12)
    known = [k.text for k in index.fuzzy.known]

    def edit(s: str) -> str:
        chars = list(s)
        for _ in range(rng.randint(0, 8)):
            if not chars:
                break
            i, op = rng.randrange(len(chars)), rng.random()
            if op < 0.3:
                del chars[i]
            elif op < 0.6:
                chars.insert(i, rng.choice("abcdefxyz {}_\u00e9\U0001f600"))
            else:
                chars[i] = rng.choice("abcde {}")
        return "".join(chars)

    pairs = []
    for _ in range(3000):
        kind = rng.random()
        if kind < 0.4:
            a = rng.choice(known)
            b = edit(rng.choice([a, rng.choice(known)]))
            if rng.random() < 0.5:
                i = rng.randrange(len(b) + 1)
                b = b[i:i + rng.randint(5, 200)]
        elif kind < 0.7:
            alphabet = rng.choice(["ab", "abc", "abcd ", "xyz\U0001f600\u00e9"])
            a = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 150)))
            b = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 150)))
        elif kind < 0.8:
            n = rng.randint(1, 100)
            a, b = ("".join(rng.choice("abc") for _ in range(n)) for _ in range(2))
        else:
            a = rng.choice(known)
            b = rng.choice(known) + " " + edit(a)
        pairs.append((a, b))
    return pairs


@pytest.mark.browser
def test_browser_scorer_equals_rapidfuzz(index, browser_page):
    from rapidfuzz import fuzz

    base, page, _requests = browser_page
    _ready(page, base)
    pairs = _pairs(index)
    got = page.evaluate("pairs => pairs.map(([a, b]) => { const r = window.denpexPartialRatio(a, b); "
                        "return [r.score, r.src_start, r.src_end, r.dest_start, r.dest_end]; })", [list(p) for p in pairs])
    diffs = []
    for (a, b), js in zip(pairs, got, strict=True):
        r = fuzz.partial_ratio_alignment(a, b)
        py = [r.score, r.src_start, r.src_end, r.dest_start, r.dest_end]
        if js != py:  # floats compared exactly: the same operations in the same order
            diffs.append(f"{a[:40]!r} / {b[:40]!r}: python {py}, page {js}")
    print(f"scorer: {len(pairs) - len(diffs)}/{len(pairs)} pairs equal (score and alignment)")
    assert not diffs, "\n".join(diffs[:10])


@pytest.mark.browser
def test_browser_paste_box_shows_the_answer(kb, index, browser_page):
    base, page, _requests = browser_page
    page.goto(base)
    page.wait_for_selector("#dkb-paste[data-ready=true]")
    for entry_id in ("cuda-out-of-memory", "nccl-watchdog-timeout"):
        text = kb.entries[entry_id].examples.match[0].text
        page.fill("#dkb-paste-input", text)
        page.wait_for_selector("#dkb-paste[data-state=done]")
        first = page.get_attribute(".dkb-paste__result", "data-entry-id")
        assert first == match(text, index=index)[0].id == entry_id
        link = page.get_attribute(".dkb-paste__result a", "href")
        assert link == f"entries/{entry_id}/" or link.endswith(f"/entries/{entry_id}/"), link
        assert kb.entries[entry_id].fix.summary.split()[0] in page.inner_text(".dkb-paste__result .dkb-paste__fix")
    shots = OUTPUT / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / "paste-desktop.png"))
    page.fill("#dkb-paste-input", "Epoch 3: loss 0.123, all good")
    page.wait_for_selector("#dkb-paste[data-state=done]")
    assert page.query_selector(".dkb-paste__result") is None
    # Hostile text is shown as text.
    page.fill("#dkb-paste-input", "<img src=x onerror=alert(1)> CUDA out of memory. Tried to allocate 2.00 GiB")
    page.wait_for_selector("#dkb-paste[data-state=done]")
    assert page.query_selector(".dkb-paste__out img") is None


@pytest.mark.browser
def test_browser_paste_box_answers_a_2000_line_paste(kb, index, browser_page):
    base, page, _requests = browser_page
    page.goto(base + "match/")
    page.wait_for_selector("#dkb-paste[data-ready=true]")
    benign = [line for log in sorted(BENIGN.glob("*.log"))
              for line in log.read_text(encoding="utf-8", errors="replace").splitlines()]
    filler = (benign * (2000 // len(benign) + 1))[:2000]
    error = kb.entries["nccl-watchdog-timeout"].examples.match[0].text.splitlines()
    pasted = "\n".join((filler[:1000] + error + filler[1000:])[:2000])
    clean = "\n".join(filler)

    def best_ms(text: str) -> tuple[float, list]:
        return page.evaluate("""text => {
            let best = Infinity, top = null;
            for (let k = 0; k < 5; k++) {
                const t0 = performance.now(); const r = window.denpexMatch(text); const ms = performance.now() - t0;
                if (ms < best) best = ms; top = r.map(x => x.id);
            }
            return [best, top];
        }""", text)

    ms, top = best_ms(pasted)
    clean_ms, clean_top = best_ms(clean)
    print(f"2,000-line paste: {ms:.1f} ms with an error, {clean_ms:.1f} ms for healthy output (every pass runs)")
    assert top[0] == match(pasted, index=index)[0].id
    assert clean_top == [] == match(clean, index=index)
    # The time is a measurement (printed, and recorded in benchmarks/README.md), not a pass/fail condition: a
    # loaded CI machine must not fail the suite.


def _training_log(count: int, seed: int) -> list[str]:
    """A healthy multi-rank training log as the scan benchmark writes it (benchmarks/mixes.py): the training
    loop's and torchrun's lines and every benign-corpus line, NCCL_DEBUG=INFO output among them, with rank
    prefixes."""
    import random
    import sys

    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import mixes
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    healthy = mixes._Healthy(random.Random(seed))
    return [healthy.line() for _ in range(count)]


@pytest.mark.browser
def test_browser_paste_box_times_a_2000_line_training_log(kb, index, browser_page):
    """Pasting a 2,000-line healthy training log (every tier runs and abstains), then the same log with one
    failure line in it. The times are printed (recorded in benchmarks/README.md); the bound asserted is loose,
    since a shared CI machine's timing is noisy: the issue's goal is 100 ms."""
    base, page, _requests = browser_page
    log = _training_log(2000, seed=2026)
    entry = kb.entries["cuda-out-of-memory"]
    error = "[rank3]: " + entry.examples.match[0].text.splitlines()[-1]
    with_error = [*log[:1200], error, *log[1201:]]
    pastes = {"healthy": "\n".join(log), "one error": "\n".join(with_error)}
    expected = {name: [r.id for r in match(text, index=index)] for name, text in pastes.items()}
    assert expected["healthy"] == []
    assert _top(match(pastes["one error"], index=index)) == [entry.id, "exact"]
    times: dict[str, list[float]] = {}
    for name, text in pastes.items():
        _ready(page, base)  # a fresh page: the first paste is timed cold
        for _ in range(7):
            page.fill("#dkb-paste-input", text)  # the input event, as a paste fires it
            page.wait_for_selector("#dkb-paste[data-state=done]")
            times.setdefault(name, []).append(float(page.get_attribute("#dkb-paste", "data-ms")))
            shown = [e.get_attribute("data-entry-id") for e in page.query_selector_all(".dkb-paste__result")]
            assert shown == expected[name], name
            said = f"{len(expected[name])} match" if expected[name] else "No match"
            assert page.inner_text(".dkb-paste__status").startswith(f"{said}{'es' if len(expected[name]) > 1 else ''} in 2000 lines")
            page.fill("#dkb-paste-input", "")
            page.wait_for_selector("#dkb-paste[data-state=done]")
    for name, ms in times.items():
        print(f"hub paste box, 2,000-line training log, {name}: first paste {ms[0]:.1f} ms, "
              f"median of the next six {sorted(ms[1:])[3]:.1f} ms")
        assert max(ms) < 1000, (name, ms)


def _error_line(text: str) -> str:
    """The line a user would type into the search box: the last one of an example that is not a code frame."""
    lines = [strip_prefixes(raw).text for raw in text.splitlines()]
    lines = [t for t in lines if t and not t.startswith(("File ", "Traceback", "raise ", "^"))]
    return lines[-1] if lines else ""


@pytest.mark.browser
def test_browser_site_search_puts_the_matched_entry_first(kb, index, browser_page):
    """A pasted error line typed into the site search gets the matcher's answer above the word-ranked results,
    on any page; a line the matcher does not know (or a few words) gets none."""
    base, page, requests = browser_page
    page.goto(base + "entries/nccl-watchdog-timeout/")
    page.wait_for_selector(".dkb-search-match", state="attached")
    asked = shown = 0
    for entry in sorted(kb.entries.values(), key=lambda e: e.id):
        line = _error_line(entry.examples.match[0].text)
        expected = match(line, index=index)
        if len(line.split()) < 3:
            continue
        page.fill(".md-search__input", line)
        page.wait_for_function(
            "q => document.querySelector('.md-search__input').value === q && "
            "document.querySelector('.dkb-search-match').getAttribute('data-state') === 'done'", arg=line)
        slot = page.eval_on_selector(".dkb-search-match", "e => [e.hidden, e.getAttribute('data-entry-id')]")
        asked += 1
        if expected:
            shown += 1
            assert slot == [False, expected[0].id], (entry.id, line, slot)
            href = page.get_attribute(".dkb-search-match a", "href")
            assert href.rstrip("/").endswith(f"entries/{expected[0].id}"), href
        else:
            assert slot[0] is True, (entry.id, line, slot)
    assert asked > 100 and shown > asked // 2, (asked, shown)  # most entries: a one-line paste names them
    for benign in ("Epoch 3: loss 0.123, all good", "NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>", "CUDA out"):
        page.fill(".md-search__input", benign)
        page.wait_for_function(
            "q => document.querySelector('.md-search__input').value === q && "
            "document.querySelector('.dkb-search-match').getAttribute('data-state') === 'done'", arg=benign)
        assert page.eval_on_selector(".dkb-search-match", "e => e.hidden") is True, benign
    assert _elsewhere(requests, base) == []
