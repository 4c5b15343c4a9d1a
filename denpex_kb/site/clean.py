"""The last word on what an entry page's body may contain: an allow-list HTML sanitizer over rendered Markdown.

`sanitize.py` makes contributor Markdown inert before rendering, but Markdown has too many corners (nested link
labels, indented fences, code spans across paragraphs) to trust a rewrite of it alone. Whatever Markdown turns
it into, the HTML passes through this allow-list (nh3, a binding to the Ammonia sanitizer) before it reaches a
page: only the tags and attributes that the hub's own Markdown extensions produce survive, links are http(s) or
relative, and every other element, attribute and URL scheme is dropped.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nh3

# What Markdown, tables, admonitions, pymdownx.tabbed/tasklist/highlight and the toc permalinks emit.
TAGS = frozenset({
    "a", "b", "blockquote", "br", "code", "del", "details", "div", "em", "h1", "h2", "h3", "h4", "h5", "h6",
    "hr", "i", "input", "kbd", "label", "li", "ol", "p", "pre", "small", "span", "strong", "sub", "summary",
    "sup", "table", "tbody", "td", "th", "thead", "tr", "ul",
})
ATTRIBUTES = {
    "*": {"class", "id"},
    "a": {"href", "title", "name"},
    "div": {"data-tabs"},
    "input": {"checked", "disabled", "name"},  # `type` is allowed by value, below
    "label": {"for"},
    "td": {"align"},
    "th": {"align"},
    "details": {"open"},
}
# Only the inputs pymdownx emits: radio buttons of tab sets and disabled task-list checkboxes.
INPUT_TYPES = {"input": {"type": {"radio", "checkbox"}}}
URL_SCHEMES = frozenset({"http", "https"})
# Dropped with their content, not just their tags.
DROP_WITH_CONTENT = frozenset({"script", "style", "template", "iframe", "object", "embed", "noscript", "svg", "math"})


# Ids and names a page body may carry: heading slugs, pymdownx's tab ids, and the mark where the tags plugin
# puts its listing (`tags.md:8-30/slug`, on a heading it writes into tags.md itself). Anything else could clobber
# the theme's own elements (`#__config` holds the theme's configuration), so it is dropped.
_OWN_ID = re.compile(r"^(?:[a-z0-9][a-z0-9_-]{0,120}|__tabbed_\d+(?:_\d+)?|[a-z0-9_/-]{1,80}\.md:\d+-\d+/slug)$")


def _filter(tag: str, attribute: str, value: str) -> str | None:
    if attribute in ("id", "name", "for") and not _OWN_ID.match(value):
        return None
    return value


def clean_html(fragment: str) -> str:
    """Rendered page content reduced to the allow-list; external links get rel="noopener nofollow"."""
    return nh3.clean(
        fragment,
        tags=set(TAGS),
        clean_content_tags=set(DROP_WITH_CONTENT),
        attributes={k: set(v) for k, v in ATTRIBUTES.items()},
        tag_attribute_values={t: {a: set(v) for a, v in m.items()} for t, m in INPUT_TYPES.items()},
        attribute_filter=_filter,
        url_schemes=set(URL_SCHEMES),
        link_rel="noopener nofollow",
        strip_comments=True,
    )


# --- After the build, whichever builder ran -------------------------------------------------------------------
#
# mkdocs runs the hook (hooks.py) that cleans each page body before the theme sees it; Zensical runs no mkdocs
# hooks. So every built page is cleaned again after the build, by build_site, for both builders: the theme's
# partials/content.html (site_overrides) writes the page body between two comment marks carrying a token drawn
# for this build, and what lies between them goes through `clean_html`. A knowledge base was written before the
# token existed, so its text cannot forge a mark; a page whose marks do not pair up is refused.

_MARK_FIELD = "dkb_body_mark"


def new_mark() -> str:
    import secrets

    return secrets.token_hex(16)


def _marks(mark: str) -> tuple[str, str]:
    return f"<!--dkb-body:{mark}-->", f"<!--/dkb-body:{mark}-->"


class UnmarkedBody(ValueError):
    """A built page whose body marks do not pair up: its body cannot be told from the theme around it."""


def clean_page(text: str, mark: str) -> tuple[str, int]:
    """`text` (a whole built page) with every marked body cleaned and the marks removed; and how many bodies."""
    start, end = _marks(mark)
    out: list[str] = []
    at = bodies = 0
    while True:
        i = text.find(start, at)
        j = text.find(end, at)
        if i < 0 and j < 0:
            break
        if i < 0 or j < i or text.find(start, i + len(start), j) >= 0:
            raise UnmarkedBody("a page body's marks do not pair up")
        out += [text[at:i], clean_html(text[i + len(start):j])]
        at = j + len(end)
        bodies += 1
    out.append(text[at:])
    return "".join(out), bodies


# Where each builder writes its search index, and the list of documents in it.
SEARCH_INDEXES = ((Path("search") / "search_index.json", "docs"), (Path("search.json"), "items"))


def clean_search_index(site: Path) -> int:
    """The search index's titles and texts are HTML that the search shows as such: they pass the same
    allow-list. Returns the number of indexes cleaned (mkdocs and Zensical write theirs in different places)."""
    cleaned = 0
    for rel, key in SEARCH_INDEXES:
        path = site / rel
        if not path.is_file():
            continue
        index = json.loads(path.read_text(encoding="utf-8"))
        for doc in index.get(key, []) if isinstance(index, dict) else []:
            for field in ("title", "text"):
                if isinstance(doc.get(field), str):
                    doc[field] = clean_html(doc[field])
        path.write_text(json.dumps(index, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
        cleaned += 1
    return cleaned


def clean_site(site: Path, mark: str) -> int:
    """Clean every marked page body of a built site, and its search index; returns the number of bodies."""
    bodies = 0
    for path in sorted(site.rglob("*.html")):
        text = path.read_text(encoding="utf-8")
        try:
            cleaned, n = clean_page(text, mark)
        except UnmarkedBody as exc:
            raise UnmarkedBody(f"{path.relative_to(site)}: {exc}") from None
        if n:
            path.write_text(cleaned, encoding="utf-8")
            bodies += n
    clean_search_index(site)
    return bodies
