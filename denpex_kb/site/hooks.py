"""mkdocs hooks of the failure hub (named in mkdocs.yml): every page body passes the allow-list sanitizer."""

from __future__ import annotations

from typing import Any

from denpex_kb.site import clean


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    # Runs after Markdown, before the theme and the search index see the content.
    return clean.clean_html(html)
