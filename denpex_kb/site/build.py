"""Writing the hub's Markdown pages from the knowledge base, then building the site with mkdocs-material."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path
from urllib.parse import urlsplit

from packaging.version import Version

from ..loader import KnowledgeBase
from ..model import PHASE_INFO, Entry, Phase
from ..normalize import strip_prefixes
from . import clean
from .audit import SiteProblem, audit_site
from .config import BUILDERS, CONFIG_NAME, PAGES_DIR, SITE_DIR, write_config
from .export import ASSET as MATCH_ASSET
from .export import match_index_json
from .render import REPO_URL, phase_title, to_markdown
from .sanitize import safe_inline, safe_label
from .search import weigh_site

# Until the package is on an index, the home page's install line installs from the repository.
INSTALL = f"pip install git+{REPO_URL}"


def _signature_line(entry: Entry, limit: int = 90) -> str:
    """The line users will recognise: the first line of the first real example that is not a traceback frame."""
    for line in entry.examples.match[0].text.splitlines():
        text = strip_prefixes(line).text
        if text and not text.startswith(("File ", "Traceback")):
            return text if len(text) <= limit else text[: limit - 1] + "…"
    return entry.title


def _code(text: str) -> str:
    """A code span for a table cell: fenced by a backtick run longer than any inside, `|` escaped."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    body = text.replace("|", "\\|")
    return f"{ticks} {body} {ticks}" if longest else f"{ticks}{body}{ticks}"


def phase_page(phase: Phase, entries: list[Entry]) -> str:
    title, meaning = PHASE_INFO[phase]
    rows = [
        f"| [{safe_label(e.title)}](../entries/{e.id}.md) | {_code(_signature_line(e))} | {e.severity.value} |"
        for e in sorted(entries, key=lambda e: (e.title.lower(), e.id))
    ]
    table = "| Failure | What the log says | Severity |\n|---|---|---|\n" + "\n".join(rows) if rows else "_No entries yet._"
    return f"---\ntitle: {title}\n---\n# {title}\n\n{meaning}\n\n{table}\n"


NONE = "\u2014"  # an entry without a response: retry and blame unknown

# The paste box: an empty placeholder that the hub's static script (site_overrides/assets/dkb.js) fills with a
# text area. Only a div with a class and an id, which the page sanitizer keeps; the script loads the compiled
# index from the JSON asset and matches in the page.
PASTE_BOX = (
    '<div class="dkb-paste" id="dkb-paste">\n\n'
    "The paste box needs JavaScript. Without it, run <code>denpex-kb match</code> on your machine.\n\n</div>"
)


def entries_page(kb: KnowledgeBase) -> str:
    """Every entry in one table, like a linter's rules table, with a filter the hub's script adds above it."""
    frameworks = {t for t, g in kb.tag_group.items() if g == "framework"}
    rows = []
    for e in sorted(kb.entries.values(), key=lambda e: e.id):
        tags = ", ".join(safe_label(t) for t in e.tags if t in frameworks) or NONE
        retry = e.response.retry.value if e.response else NONE
        blame = e.response.blame.value if e.response else NONE
        rows.append(
            f"| `{e.id}` | [{safe_label(e.title)}](entries/{e.id}.md) | {safe_label(phase_title(e.phase))} | {tags} "
            f"| {e.severity.value} | {retry} | {blame} |"
        )
    table = "| ID | Title | Phase | Frameworks | Severity | Retry | Blame |\n|---|---|---|---|---|---|---|\n" + "\n".join(rows)
    return f"""---
title: All entries
hide:
  - toc
---
# All entries

Every failure the hub knows, {len(rows)} of them. **Retry** is what a scheduler should do when this failure started
it all (*no*: fix first; *yes*: rerun as is; *elsewhere*: rerun without the node, GPU or link the log names;
*depends*: the entry's checklist tells), **blame** is where the fault lies; {NONE} where the entry does not say yet.

<div class="dkb-filter" id="dkb-entries-filter"></div>

{table}
"""


def match_page() -> str:
    return f"""---
title: Match an error
hide:
  - toc
---
# Match an error

Paste an error line, a traceback or a whole log excerpt. The box runs the same prefix stripping, signatures and
ranking as `denpex-kb match`, in this page: nothing you paste is sent anywhere. When no signature matches, it
compares the lines with the wordings each entry knows, as `match` does, and marks such an answer *fuzzy* with
the wording it is close to; a bare exception class is marked *evidence only*.

{PASTE_BOX}

For a whole multi-rank log (the first failure and its fallout), use `denpex-kb scan job.log`.
"""


VERDICT_MEANING = {
    "none": ("no failure found", "nothing to do"),
    "yes": ("`yes`: transient", "rerun as is"),
    "elsewhere": ("`elsewhere`: hardware on some rank", "rerun without the printed nodes, and take them out of service"),
    "no": ("`no`: a rerun fails the same way", "fix the code, config, data or image first"),
    "depends": ("`depends`", "a person decides with the entry's checklist (the reason carries its note)"),
    "unknown": ("`unknown`: no entry knows the failure", "a person looks, and reports the failure"),
}


def verdict_page(kb: KnowledgeBase) -> str:
    """How `scan` turns the entries' responses into a verdict and exit codes; the codes come from the library."""
    from ..commands.recipe import recipes
    from ..verdict import EXIT_CODES

    rows = "\n".join(
        f"| {EXIT_CODES[key]} | {VERDICT_MEANING[key][0]} | {VERDICT_MEANING[key][1]} |" for key in VERDICT_MEANING
    )
    counts: dict[str, int] = {}
    for entry in kb.entries.values():
        key = entry.response.retry.value if entry.response else "none given"
        counts[key] = counts.get(key, 0) + 1
    spread = ", ".join(f"{n} `{key}`" for key, n in sorted(counts.items()))
    names = "\n".join(f"- `denpex-kb recipe {name}`" for name in recipes())
    return f"""---
title: Rerun or fix first
---
# Rerun or fix first

Every entry says what a scheduler should do once that failure started it all: rerun as is, rerun without the
node, GPU or link the log names, or fix something first. Today: {spread}. `denpex-kb scan` turns that into one
verdict for the whole job, from the initiating failure and the evidence on every rank:

- a hardware fault on any rank (an entry whose answer is `elsewhere`: an Xid, an uncorrectable ECC error, a GPU
  fallen off the bus, a link down) makes the verdict `elsewhere`, whatever the software on the other ranks said,
  and names the hosts and PCI bus ids to exclude;
- a kernel-log line stamped before the job's first line is an earlier job's event: it is listed as "before this
  job" and changes nothing;
- otherwise the initiating failure's own answer decides; when a launcher's exit code is the only evidence, it is
  read with what else the log holds.

`denpex-kb scan LOG --exit-by-verdict` exits with a code a launcher can act on (`--exclude-file F` writes the host
names to exclude, one a line); `--json` carries the same verdict as a top-level object.

| Exit | Verdict | What to do |
|---|---|---|
{rows}

Usage and I/O errors stay exit 2, as for every command. The recipes that wire this into schedulers are shipped
with the package and run in its tests:

{names}
"""


def codes_page() -> str:
    """Every problem code of `check` and `test`, one section each: the page each reported problem links to."""
    from ..codes import CODES

    rows = "\n".join(f"| [{c.code}](#{c.anchor}) | `{c.name}` | {c.severity.value} | {c.description} |" for c in CODES)
    sections = "\n".join(
        f"## {c.code}\n\n`{c.name}`, {c.severity.value}. {c.description}\n\n**Fix.** {c.fix}\n" for c in CODES
    )
    return f"""---
title: Check codes
---
# Check codes

`denpex-kb check` and `denpex-kb test` report each problem of the knowledge base as
`file:line:col: severity CODE [check] message`, followed by the link to the code's section on this page. An error
makes the command exit 1; a warning is reported and changes nothing. Codes are stable: one is never reused for
another meaning. Codes 0xx are about reading a file, 1xx the checks over entries, 2xx the examples and the benign
corpus run through the matcher.

| Code | Name | Severity | Meaning |
|---|---|---|---|
{rows}

{sections}"""


def prev_next(entry: Entry, same_phase: list[Entry]) -> str:
    """Links to the entries before and after `entry` in its phase, ordered by title as on the phase page."""
    at = next(i for i, e in enumerate(same_phase) if e.id == entry.id)
    phase = safe_label(phase_title(entry.phase))
    parts = []
    if at > 0:
        prev = same_phase[at - 1]
        parts.append(f"&larr; Previous in {phase}: [{safe_label(prev.title)}]({prev.id}.md)")
    if at + 1 < len(same_phase):
        nxt = same_phase[at + 1]
        parts.append(f"Next in {phase}: [{safe_label(nxt.title)}]({nxt.id}.md) &rarr;")
    if not parts:
        return ""
    return "\n---\n\n<small>" + " &middot; ".join(parts) + "</small>\n"


def whats_new(entries: list[Entry]) -> str:
    """The entries the newest release added, grouped by phase. Every entry of a release carries the same
    `since`, so a "recently added" list could only repeat it; how many each release added says more."""
    if not entries:
        return ""
    by_version: dict[Version, list[Entry]] = {}
    for e in entries:
        by_version.setdefault(Version(e.since), []).append(e)
    newest = max(by_version)
    history = ", ".join(f"{len(by_version[v])} in {v}" for v in sorted(by_version, reverse=True))
    lines = []
    for phase in Phase:
        added = sorted((e for e in by_version[newest] if e.phase is phase), key=lambda e: (e.title.lower(), e.id))
        if added:
            links = ", ".join(f"[{safe_label(e.title)}](entries/{e.id}.md)" for e in added)
            lines.append(f"- **{PHASE_INFO[phase][0]}**: {links}")
    rows = "\n".join(lines)
    return f"## New in {newest}\n\nEntries added by release: {history}. The {len(by_version[newest])} new in {newest}, by phase:\n\n{rows}"


def home_page(kb: KnowledgeBase) -> str:
    entries = list(kb.entries.values())
    counts = "\n".join(
        f"| [{PHASE_INFO[p][0]}](phases/{p.value}.md) | {sum(e.phase is p for e in entries)} | {PHASE_INFO[p][1]} |"
        for p in Phase
    )
    news = whats_new(entries)
    return f"""---
title: The failure hub
hide:
  - navigation
---
# The failure hub

Your training job just died. This hub names what killed it and how to fix it: {len(entries)} failures of PyTorch,
DeepSpeed, FSDP, NCCL, CUDA, Megatron, Hugging Face, Slurm and the GPUs themselves, each with the text the software
really prints, how to tell it from its look-alikes, the fix, and the commands that keep the evidence and prove the fix.

## Paste your error

{PASTE_BOX}

The box matches in this page, as the command line does on your machine; nothing you paste is sent anywhere.
Or search the hub with the search box above, or let the command line find it:

```bash
{INSTALL}
denpex-kb match "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB."
# a whole multi-rank log, plain or .gz: the first failure, its fix, the fallout
denpex-kb scan job-1234.log
```

## By phase of the job

| Phase | Entries | What happens there |
|---|---|---|
{counts}

{news}

Browse [all entries](entries.md) or by [tag](tags.md). Found a failure that is missing, or a wrong match?
[Open an issue](https://github.com/denpex-kb/denpex-kb/issues/new/choose).
"""


def write_docs(kb: KnowledgeBase, docs: Path) -> list[Path]:
    """Write every page into `docs` (emptied first: it is generated, never edited)."""
    if docs.exists():
        shutil.rmtree(docs)
    (docs / "entries").mkdir(parents=True)
    (docs / "phases").mkdir()
    written = []

    def put(rel: str, text: str) -> None:
        path = docs / rel
        path.write_text(text, encoding="utf-8")
        written.append(path)

    put("index.md", home_page(kb))
    put("entries.md", entries_page(kb))
    put("match.md", match_page())
    put("verdict.md", verdict_page(kb))
    put("codes.md", codes_page())
    by_phase = {p: sorted((e for e in kb.entries.values() if e.phase is p), key=lambda e: (e.title.lower(), e.id)) for p in Phase}
    for phase in Phase:
        put(f"phases/{phase.value}.md", phase_page(phase, by_phase[phase]))
    titles = {e.id: e.title for e in kb.entries.values()}
    for entry in kb.entries.values():
        put(f"entries/{entry.id}.md", to_markdown(entry, titles) + prev_next(entry, by_phase[entry.phase]))
    from ..compiler import compile_kb

    index, _full = compile_kb(kb)
    (docs / "assets").mkdir(exist_ok=True)
    put(MATCH_ASSET, match_index_json(index, kb))
    groups = kb.tags
    described = "\n".join(
        f"- **{safe_inline(tag)}** ({group}): {safe_inline(text)}" for group, tags in groups.items() for tag, text in tags.items()
    )
    put("tags.md", f"---\ntitle: Tags\n---\n# Tags\n\n<!-- material/tags -->\n\n## The vocabulary\n\n{described}\n")
    return written


def build_site(kb: KnowledgeBase, config_file: Path, docs: Path, site: Path, *, builder: str = "mkdocs") -> Path:
    """Write the pages and the completed config into `docs`, build the site with `builder` (strict), audit it,
    and move it to `site`. Returns the generated config, which either builder reads as it is."""
    if builder not in BUILDERS:
        raise ValueError(f"unknown builder {builder!r}: one of {', '.join(BUILDERS)}")
    if docs.exists():
        shutil.rmtree(docs)  # generated as a whole, never edited
    pages, built = docs / PAGES_DIR, docs / SITE_DIR
    write_docs(kb, pages)
    mark = clean.new_mark()
    generated = write_config(kb, config_file, pages, built, docs / CONFIG_NAME, mark)
    if builder == "mkdocs":
        _build_reporting_warnings(generated)
    else:
        _build_with_zensical(generated)
    # Zensical runs no mkdocs hooks: the page sanitizer and the search weights run here, after either builder
    # (for mkdocs a second time, which changes nothing the hook already cleaned).
    try:
        bodies = clean.clean_site(built, mark)
    except clean.UnmarkedBody as exc:
        raise UnsafeSiteError([SiteProblem(str(exc).split(":", 1)[0], 0, str(exc))]) from None
    if bodies < len(kb.entries):
        raise UnsafeSiteError([SiteProblem(".", 0, f"only {bodies} page bodies were marked for the sanitizer; "
                                                   f"the theme's partials/content.html override did not apply")])
    weigh_site(built)
    root_404(built, _site_url(generated))
    problems = audit_site(built)
    if problems:
        raise UnsafeSiteError(problems)
    if site.resolve() != built.resolve():
        if site.exists():
            shutil.rmtree(site)
        site.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(built), str(site))
    return generated


def _site_url(config_file: Path) -> str:
    from ruamel.yaml import YAML

    data = YAML(typ="safe", pure=True).load(config_file.read_text(encoding="utf-8")) or {}
    return str(data.get("site_url") or "")


_BASE = re.compile(r'<base href="[^"]*">')
_BASE_SCRIPT = re.compile(r'(\(document\.querySelector\("base"\),)[^)]*(\)</script>)')


def root_404(site: Path, site_url: str) -> bool:
    """Give the 404 page its site root, whichever builder wrote it (site_overrides/404.html).

    The page is served for a missing path at any depth, so its links resolve against a <base> set to site_url's
    path (moved to the server's root by its script when the site is served elsewhere). mkdocs gets that root
    from the hub's hook; Zensical runs no hooks, so its page said `<base href="">` and the script compared the
    address with null, which left every link resolving against the missing path's folder. Here the <base> and
    the script get the root, and the links the builder wrote as absolute paths under the root (Zensical's
    stylesheets, scripts and navigation) become relative to the <base>, as mkdocs writes them once the hook
    has run; on a page the hook already fixed nothing changes. Returns whether there was a 404 page."""
    page = site / "404.html"
    if not page.is_file():
        return False
    root = urlsplit(site_url or "/").path or "/"
    if not root.endswith("/"):
        root += "/"
    text = page.read_text(encoding="utf-8")

    def relative(m: re.Match[str]) -> str:
        value = m.group(2)
        if value.startswith("//") or not value.startswith(root):
            return m.group(0)
        return f'{m.group(1)}="{value[len(root):] or "."}"'

    text = re.sub(r'(?<=\s)(href|src)="([^"]*)"', relative, text)  # attributes only, not the script's b.href
    text = _BASE.sub(lambda m: f'<base href="{html.escape(root, quote=True)}">', text, count=1)
    literal = json.dumps(root).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    text = _BASE_SCRIPT.sub(lambda m: m.group(1) + literal + m.group(2), text, count=1)
    page.write_text(text, encoding="utf-8")
    return True


class SiteBuildError(Exception):
    """mkdocs refused the build; the message carries the warnings that made a strict build abort."""


def _build_reporting_warnings(config_file: Path) -> None:
    # Through the Python API mkdocs logs its warnings to no handler, so a strict build would abort with only
    # "Aborted with N warnings": collect them and say what they were.
    import logging

    from mkdocs.commands.build import build
    from mkdocs.config import load_config
    from mkdocs.exceptions import Abort

    seen: list[str] = []

    class _Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    handler = _Collect(level=logging.WARNING)
    logger = logging.getLogger("mkdocs")
    logger.addHandler(handler)
    try:
        build(load_config(str(config_file), strict=True))
    except Abort as exc:
        details = "\n".join(f"  {line}" for line in seen) or "  (mkdocs gave no details)"
        raise SiteBuildError(f"{exc}\n{details}") from None
    finally:
        logger.removeHandler(handler)


def _build_with_zensical(config_file: Path) -> None:
    """`zensical build --strict` on the generated config, in a process of its own (it is a command line)."""
    import importlib.util
    import subprocess
    import sys

    if importlib.util.find_spec("zensical") is None:
        raise SiteBuildError("the zensical builder is not installed: pip install zensical")
    done = subprocess.run([sys.executable, "-m", "zensical", "build", "--strict", "--config-file", str(config_file)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        details = (done.stderr.strip() or done.stdout.strip() or "(no output)").splitlines()
        raise SiteBuildError("zensical build failed:\n" + "\n".join(f"  {line}" for line in details[-20:]))


class UnsafeSiteError(Exception):
    """The built site holds script, an event handler or a dangerous URL; nothing of it may be published."""

    def __init__(self, problems: list[SiteProblem], hint: str | None = None) -> None:
        self.problems = problems
        lines = "\n".join(p.render() for p in problems[:20])
        more = f"\n... and {len(problems) - 20} more" if len(problems) > 20 else ""
        why = f" ({hint})" if hint else ""
        super().__init__(f"the built site is unsafe ({len(problems)} problems){why}; nothing was published:\n{lines}{more}")
