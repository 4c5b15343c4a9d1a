"""The last word on what an entry page's body may contain: an allow-list HTML sanitizer over rendered Markdown.

`sanitize.py` makes contributor Markdown inert before rendering, but Markdown has too many corners (nested link
labels, indented fences, code spans across paragraphs) to trust a rewrite of it alone. Whatever Markdown turns
it into, the HTML passes through this allow-list (nh3, a binding to the Ammonia sanitizer) before it reaches a
page: only the tags and attributes that the hub's own Markdown extensions produce survive, links are http(s) or
relative, and every other element, attribute and URL scheme is dropped.
"""

from __future__ import annotations

import re

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
