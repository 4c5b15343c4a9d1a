"""Where an example's text comes from: `owner/repo#N`, an http(s) URL of the original site, or what was run.

A reviewer follows the provenance to the place the text was printed, so it must lead there: a proxy, a
translation or cache service, or an archive in front of the original page hides whether the original still
says it (and who wrote it), and a doubled `source: source: ...` is a path that leads nowhere.
"""

from __future__ import annotations

import re
import urllib.parse

ISSUE_REF = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}#[1-9][0-9]{0,9}")
# Software then a version that starts with a digit: `captured: torch 2.13.0 (CPU, gloo)`, `captured: bash 5`.
CAPTURED = re.compile(r"captured: [A-Za-z][\w.+-]* v?[0-9][\w.+-]*(?:[ ,;(].*)?", re.DOTALL)
_URL = re.compile(r"https?://\S+")
# A URL inside the path or query (plain or percent-encoded): `https://r.jina.ai/https://github.com/...`,
# `https://web.archive.org/web/2024/https://...`, `...?url=https%3A%2F%2F...`.
_INNER_URL = re.compile(r"(?:https?:/{1,2}|https?%3a%2f%2f)", re.IGNORECASE)
# Services that show another site's page under their own address. Matched on the host and its parents.
PROXY_HOSTS = frozenset({
    "web.archive.org", "wayback.archive.org", "archive.ph", "archive.today", "archive.is",
    "archive.li", "archive.md", "archive.vn", "archive.fo", "webcache.googleusercontent.com", "cachedview.nl",
    "translate.google.com", "translate.googleusercontent.com", "translate.goog", "r.jina.ai", "12ft.io",
    "ghproxy.com", "ghproxy.net", "gh-proxy.com", "ghfast.top", "kkgithub.com", "bgithub.xyz", "hub.fastgit.org",
    "fastgit.org", "gitclone.com", "githubfast.com", "ghp.ci", "freedium.cfd", "scribe.rip",
})


def _host(url: str) -> str:
    try:
        return (urllib.parse.urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


def _proxied_by(host: str) -> str | None:
    """The proxy service `host` belongs to (itself or a parent domain), or None."""
    labels = host.split(".")
    for i in range(len(labels) - 1):
        parent = ".".join(labels[i:])
        if parent in PROXY_HOSTS:
            return parent
    return None


def _inner(url: str) -> str | None:
    """The original URL a proxied one carries, when it carries one."""
    m = _INNER_URL.search(url, url.index("//") + 2)
    if m is None:
        return None
    inner = urllib.parse.unquote(url[m.start():])
    return re.sub(r"^(https?):/(?!/)", r"\1://", inner)


def _url_problem(value: str) -> str | None:
    if not _URL.fullmatch(value):
        return "is not one URL: write the address alone, without spaces or text around it"
    host = _host(value)
    if not host or "." not in host:
        return "does not name a public host; link the page on its original site"
    proxy = _proxied_by(host)
    inner = _inner(value)
    if proxy is None and inner is None:
        return None
    via = f"through {proxy}" if proxy else "with another URL inside it"
    original = f" ({inner})" if inner else ""
    return f"leads to the page {via}, not on its original site; link the original page{original} instead"


def _doubled(value: str) -> str:
    rest = value[len("source:"):].strip()
    if _URL.fullmatch(rest) or ISSUE_REF.fullmatch(rest) or rest.startswith("captured:"):
        hint = f"write {rest!r} alone"
    else:
        parts = rest.split("/", 2)
        example = (
            f" (for a file on GitHub: https://github.com/{parts[0]}/{parts[1]}/blob/<commit>/{parts[2]})"
            if len(parts) == 3 and all(parts) else ""
        )
        hint = f"link the file at its original site, pinned to a commit or tag{example}"
    return f"repeats its key (`source: source: ...`) and names no place a reader can open; {hint}"


def provenance_problem(value: str) -> str | None:
    """Why `value` is not a provenance an example may carry (with the fix), or None when it is one."""
    value = value.strip()
    if ISSUE_REF.fullmatch(value) or CAPTURED.fullmatch(value):
        return None
    if value.startswith("source:"):
        return _doubled(value)
    if value.startswith(("http://", "https://")):
        return _url_problem(value)
    if value.startswith("captured:"):
        return ("names no software and version; write `captured: <software> <version>` first, then how it was run "
                "(e.g. `captured: torch 2.13.0 (CPU, gloo)`)")
    return "is not a provenance; write `owner/repo#N`, the http(s) URL of the original page, or `captured: <software> <version>`"
