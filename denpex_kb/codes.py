"""The table of problem codes: the one place a code is declared, with its name, severity, meaning and fix.

The loader, the validators, `denpex-kb test`, the hub's codes page and the table in CONTRIBUTING.md all read
this table; a `Problem` with a code that is not here cannot be built. Codes are stable: a code is never reused
for another meaning, and a retired code stays out of the table rather than changing.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from .errors import UnknownCodeError


class ProblemSeverity(str, Enum):
    error = "error"  # `check` and `test` exit 1
    warning = "warning"  # reported, the exit code stays 0


@dataclass(frozen=True)
class Code:
    code: str  # DKB + three digits: 0xx reading a file, 1xx checks, 2xx examples and the benign corpus
    name: str  # kebab-case, shown in brackets after the code; a check's name is its code's name
    severity: ProblemSeverity
    description: str  # one sentence: what the code means
    fix: str  # one sentence: how to fix it

    @property
    def anchor(self) -> str:
        """The code's anchor on the hub's codes page (the heading's slug)."""
        return self.code.lower()


E, W = ProblemSeverity.error, ProblemSeverity.warning

CODES: tuple[Code, ...] = (
    Code("DKB000", "missing-kb", E, "The knowledge-base directory does not exist.",
         "Run the command from the repository root, or pass the directory with `--kb DIR`."),
    Code("DKB001", "unreadable", E,
         "The file cannot be read or is not valid YAML (syntax, encoding, BOM, aliases, anchors, size, depth, a huge number).",
         "Fix the YAML at the position given: indent with spaces, save as UTF-8 without BOM, write values out instead of aliases."),
    Code("DKB002", "duplicate-key", E, "A key appears twice in one mapping.",
         "Merge the two occurrences into one key."),
    Code("DKB003", "schema", E,
         "The entry does not match the schema: a missing, unknown or invalid field (placeholders land here).",
         "Fill in, rename or remove the field named; `denpex-kb schema` lists every field and its allowed values."),
    Code("DKB004", "file-name", E, "The file name is not the entry's id.",
         "Rename the file to `<id>.yaml`, or change the id to the file's name."),
    Code("DKB005", "entry-file", E, "The entry file is a link or lies outside `kb/`.",
         "Replace the link with the file itself, inside `kb/`."),
    Code("DKB006", "schema-comment", W,
         "The first line is not the `yaml-language-server` schema comment, so editors cannot validate while typing.",
         "Make the first line `# yaml-language-server: $schema=../schema/entry.schema.json`."),
    Code("DKB008", "placeholders", E, "A `<fill in ...>` placeholder from `denpex-kb new` is still in the entry.",
         "Replace the placeholder with the real value."),
    Code("DKB010", "tag-vocabulary", E, "`kb/_tags.yaml` is missing or malformed.",
         "Restore `kb/_tags.yaml` as a mapping of each group to a mapping of tag: description."),
    Code("DKB101", "unique-ids", E, "Two files use the same id.",
         "Give the newer entry a new id: ids are never reused."),
    Code("DKB102", "related", E, "A `related` id does not exist or was retired.",
         "Fix the id, link the retired entry's replacement, or remove the link."),
    Code("DKB103", "tags", E, "A tag is not in `kb/_tags.yaml`, is listed twice, or no framework tag is given.",
         "Use tags from `kb/_tags.yaml` (add a new one there with a description), once each, with at least one framework tag."),
    Code("DKB104", "signatures", E,
         "A signature does not compile under RE2, cannot be translated for the hub's browser matcher (inline flags), "
         "is a malformed template, matches the empty string, repeats another, or has no literal anchor of 6+ characters.",
         "Fix the pattern at the position given, or add an `anchors:` literal that every matching line contains."),
    Code("DKB105", "related-self", E, "An entry lists itself as related.",
         "Remove the link to itself."),
    Code("DKB106", "response", E, "A stable entry does not say what a scheduler should do (`response`).",
         "Add a `response` block after `fix` with `retry` and `blame` (and a `note` when retry is `depends`)."),
    Code("DKB107", "replaced-by", E, "A tombstone's `replaced_by` does not exist or is retired too.",
         "Point `replaced_by` at an entry that exists and is not retired."),
    Code("DKB108", "invisible-text", E,
         "A bidi control is in the file (Trojan Source), or a control character is in prose; signatures and examples "
         "may keep tabs and ANSI CSI sequences.",
         "Delete the character, or write what it stands for in words."),
    Code("DKB109", "collateral-cycle", E, "`collateral-of` links form a cycle, so no entry in it is the root cause.",
         "Keep the link that points at the root cause and make the others `sibling` or remove them."),
    Code("DKB110", "provenance", E,
         "An example's `source` is not `owner/repo#N`, an http(s) URL of the original site, or "
         "`captured: <software> <version>` (a proxy or archive URL, or a doubled `source: source:`, is rejected).",
         "Write the issue as `owner/repo#N`, link the original page (not a proxy or archive of it), or say what you ran "
         "as `captured: <software> <version>`."),
    Code("DKB111", "command-syntax", E,
         "A command's `run`, or a bash block in the prose, is not what bash would run: an unclosed quote, or a "
         "`<placeholder>` outside quotes, which bash reads as a redirection from a file of that name.",
         "Close the quote, or write the value the reader fills in as a shell variable (`\"$NODE\"`) and say in the "
         "description what to set it to."),
    Code("DKB112", "since", E, "`since` names a denpex-kb version newer than the package's own.",
         "Write the version the entry first ships in: for a new entry, the package's version (`denpex_kb.__version__`)."),
    Code("DKB201", "match-example", E, "A match example matches no entry.",
         "Widen a signature of the entry to cover the wording, or drop the example if it is not this failure."),
    Code("DKB202", "shadowing", E, "A match example ranks another entry first: that entry shadows this one.",
         "Make the other entry's signature more specific, or this entry's longer."),
    Code("DKB203", "no-match-example", E, "A no_match example matches the entry.",
         "Make the entry's signatures specific enough to exclude the benign line."),
    Code("DKB204", "benign-corpus", E, "Healthy output in the benign corpus produces a finding.",
         "Make the entry's signature more specific, or have a reviewer add the line to `tests/corpus/benign/allowlist.yaml`."),
    Code("DKB205", "too-generic", E, "A signature matches several distinct benign lines: it is too generic.",
         "Add the words that only the failure prints."),
    Code("DKB206", "hot-anchor", E,
         "An anchor that `scan` searches every line for appears on many lines of healthy output, so each of those "
         "lines takes the slow per-line path.",
         "Give the signature a longer anchor (`anchors:`), or, for a fingerprint event that is healthy output, set "
         "`level: info` so that it is looked for only just before the failure's own lines."),
)

BY_CODE: dict[str, Code] = {c.code: c for c in CODES}
BY_NAME: dict[str, Code] = {c.name: c for c in CODES}


def lookup(code: str) -> Code:
    """The declared code; UnknownCodeError for anything the table does not hold."""
    try:
        return BY_CODE[code]
    except KeyError:
        raise UnknownCodeError(f"problem code {code!r} is not declared in denpex_kb/codes.py") from None


CODES_PAGE = "codes/"  # the hub page with one section per code


def code_url(code: str) -> str:
    """The code's section on the hub (the base honours DENPEX_KB_HUB_URL, like the entry pages)."""
    from .urls import hub_url

    return f"{hub_url()}{CODES_PAGE}#{lookup(code).anchor}"
