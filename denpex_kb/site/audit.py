"""A built site read back as a browser would parse it: no script, handler or dangerous URL that the theme did not put there.

`build_site` runs this after every build and fails on any finding, so a sanitizer regression cannot ship.
What counts as the theme's own: `<script>` elements outside the page body, loading files of this site or
holding the theme's inline bootstrap. Inside the body (`<article>`) nothing executable is allowed at all.
"""

from __future__ import annotations

import html.parser
import re
from dataclasses import dataclass
from pathlib import Path

_URL_ATTRS = frozenset({"href", "src", "action", "formaction", "xlink:href", "srcset", "poster", "data", "background"})
_BAD_SCHEME = re.compile(r"^\s*(?:javascript|data|vbscript)\s*:", re.I)
_EXECUTABLE = frozenset({"script", "iframe", "object", "embed", "frame", "frameset", "base", "form", "style", "svg", "math", "template"})


@dataclass(frozen=True)
class SiteProblem:
    path: str
    line: int
    message: str

    def render(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


def _scheme_stripped(value: str) -> str:
    # Browsers ignore control characters and whitespace inside a scheme ("java\tscript:").
    return re.sub(r"[\x00-\x20]", "", html.unescape(value))


class _Auditor(html.parser.HTMLParser):
    def __init__(self, display: str) -> None:
        super().__init__(convert_charrefs=True)
        self.display = display
        self.article = 0
        self.problems: list[SiteProblem] = []
        self._script_body: list[str] | None = None

    def _problem(self, message: str) -> None:
        self.problems.append(SiteProblem(self.display, self.getpos()[0], message))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "article":
            self.article += 1
        for name, value in attrs:
            if name.startswith("on"):
                self._problem(f"<{tag}> carries the event handler {name}=")
            if name in _URL_ATTRS and value and _BAD_SCHEME.match(_scheme_stripped(value)):
                scheme = _scheme_stripped(value).split(":", 1)[0].lower()
                self._problem(f"<{tag} {name}> holds a {scheme}: URL")
            if name == "http-equiv" and value and value.lower() == "refresh" and tag == "meta" and self.article:
                self._problem("a meta refresh inside the page body")
        if self.article and tag in _EXECUTABLE:
            self._problem(f"<{tag}> inside the page body")
        if tag == "script" and not self.article:
            src = dict(attrs).get("src")
            if src is not None and re.match(r"^\s*(?:[a-z][a-z0-9+.-]*:|//)", src, re.I):
                self._problem(f"a script loaded from another site: {src}")
            if src is None:
                self._script_body = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "article" and self.article:
            self.article -= 1
        if tag == "script" and self._script_body is not None:
            body = "".join(self._script_body)
            self._script_body = None
            if re.search(r"\balert\s*\(|\bprompt\s*\(|\bconfirm\s*\(|document\.cookie", body):
                self._problem("an inline script calls a dialog or reads cookies")

    def handle_data(self, data: str) -> None:
        if self._script_body is not None:
            self._script_body.append(data)


def audit_html(text: str, display: str = "<html>") -> list[SiteProblem]:
    auditor = _Auditor(display)
    auditor.feed(text)
    auditor.close()
    return auditor.problems


def audit_site(site: Path) -> list[SiteProblem]:
    problems: list[SiteProblem] = []
    for path in sorted(site.rglob("*.html")):
        problems.extend(audit_html(path.read_text(encoding="utf-8", errors="replace"), str(path.relative_to(site))))
    return problems
