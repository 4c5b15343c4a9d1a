"""mkdocs hooks of the failure hub (named in mkdocs.yml): every page body passes the allow-list sanitizer, the
404 page finds the site's assets from any path it is served at, and the search index is weighted for pasted
error lines.

`build-docs` does not rely on the first and last of these: Zensical runs no hooks, so build_site cleans every
built page body and weighs the search index after the build, for either builder (clean.clean_site). They stay
for a plain `mkdocs build`/`mkdocs serve` of a generated config."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from denpex_kb.site import clean
from denpex_kb.site.search import weigh_site


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    # Runs after Markdown, before the theme and the search index see the content.
    return clean.clean_html(html)


def on_template_context(context: Any, template_name: str, config: Any) -> Any:
    # mkdocs writes the 404 page's links as absolute paths under site_url's path, which only work where the
    # site is published. Relative links and a <base> (site_overrides/404.html) work there without script, and
    # anywhere else (the site served from the root, say) once the page's script moves the <base>.
    if template_name == "404.html":
        context["base_url"] = ""
        context["dkb_site_root"] = urlsplit(config.site_url or "/").path or "/"
    return context


def on_post_build(config: Any) -> None:
    weigh_site(Path(config.site_dir))
