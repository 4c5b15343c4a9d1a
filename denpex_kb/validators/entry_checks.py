"""Checks that look at one entry at a time."""

from __future__ import annotations

from collections.abc import Iterable

from ..loader import SCHEMA_LINE, KnowledgeBase, Loaded
from ..model import Entry, Signature
from ..problems import Problem, Severity
from ..signatures import SignatureError, compile_signature
from . import EntryCheck, register


@register
class FileNameIsId(EntryCheck):
    name = "file-name"
    code = "DKB004"
    description = "The file is named after the entry's id."

    def check(self, loaded: Loaded, kb: KnowledgeBase) -> Iterable[Problem]:
        if loaded.path.stem != loaded.entry.id:
            yield self.problem(
                loaded, ("id",), f"the file name must equal the id: rename the file to {loaded.entry.id}.yaml or change the id to {loaded.path.stem!r}"
            )


@register
class SchemaComment(EntryCheck):
    name = "schema-comment"
    code = "DKB006"
    description = "The file starts with the yaml-language-server schema line, so editors validate while typing."

    def check(self, loaded: Loaded, kb: KnowledgeBase) -> Iterable[Problem]:
        with loaded.path.open(encoding="utf-8") as fh:
            first = fh.readline().rstrip("\n")
        if first != SCHEMA_LINE:
            yield Problem(loaded.display, 1, 1, self.code, self.name, f"the first line must be `{SCHEMA_LINE}`", Severity.warning)


@register
class TagsInVocabulary(EntryCheck):
    name = "tags"
    code = "DKB103"
    description = "Every tag is in kb/_tags.yaml, and each entry has a framework tag."

    def check(self, loaded: Loaded, kb: KnowledgeBase) -> Iterable[Problem]:
        entry = loaded.entry
        if not isinstance(entry, Entry) or not kb.tags:
            return
        groups = kb.tag_group
        for i, tag in enumerate(entry.tags):
            if tag not in groups:
                yield self.problem(loaded, ("tags", i), f"tag {tag!r} is not in kb/_tags.yaml; use a listed tag or add it there with a description")
        if len(set(entry.tags)) != len(entry.tags):
            yield self.problem(loaded, ("tags",), "a tag is listed twice; remove the duplicate")
        if not any(groups.get(t) == "framework" for t in entry.tags):
            yield self.problem(loaded, ("tags",), "add at least one framework tag (see the `framework` group in kb/_tags.yaml)")


@register
class SignaturesCompile(EntryCheck):
    name = "signatures"
    code = "DKB104"
    description = "Regexes compile under RE2, templates are well formed, and every signature has a literal anchor."

    def check(self, loaded: Loaded, kb: KnowledgeBase) -> Iterable[Problem]:
        entry = loaded.entry
        if not isinstance(entry, Entry):
            return
        seen: set[tuple[str, str]] = set()
        for i, sig in enumerate(entry.signatures):
            key = (sig.kind.value, sig.text)
            if key in seen:
                yield self.problem(loaded, ("signatures", i, "text"), "this signature repeats an earlier one; remove it")
            seen.add(key)
            try:
                compile_signature(sig)
            except SignatureError as exc:
                yield self.problem(loaded, ("signatures", i, "text"), f"{sig.kind.value} signature: {exc}")
        for i, event in enumerate(entry.fingerprint.events if entry.fingerprint else []):
            try:
                compile_signature(Signature(kind=event.kind, text=event.text))
            except SignatureError as exc:
                yield self.problem(loaded, ("fingerprint", "events", i, "text"), f"fingerprint event: {exc}")


@register
class RelatedNotSelf(EntryCheck):
    name = "related-self"
    code = "DKB105"
    description = "An entry does not relate to itself."

    def check(self, loaded: Loaded, kb: KnowledgeBase) -> Iterable[Problem]:
        entry = loaded.entry
        if isinstance(entry, Entry):
            for i, rel in enumerate(entry.related):
                if rel.id == entry.id:
                    yield self.problem(loaded, ("related", i, "id"), "an entry cannot be related to itself; remove this item")


@register
class PlaceholdersFilled(EntryCheck):
    name = "placeholders"
    code = "DKB008"
    description = "No `<fill in ...>` placeholder from `denpex-kb new` is left in the entry."

    def check(self, loaded: Loaded, kb: KnowledgeBase) -> Iterable[Problem]:
        from ..scaffold import PLACEHOLDER_MARK, placeholders

        for loc, line, col in placeholders(loaded.doc):
            value = loaded.doc
            for key in loc:
                value = value[key]
            if isinstance(value, str) and PLACEHOLDER_MARK in value:
                where = ".".join(str(k) for k in loc)
                yield Problem(loaded.display, line, col, self.code, self.name,
                              f"{where} still holds the scaffold's placeholder {value.strip()[:60]!r}; replace it with the real value")


@register
class ResponseGiven(EntryCheck):
    name = "response"
    code = "DKB106"
    description = "A stable entry says what a scheduler should do (`response`: retry, blame, note)."

    def check(self, loaded: Loaded, kb: KnowledgeBase) -> Iterable[Problem]:
        entry = loaded.entry
        if isinstance(entry, Entry) and entry.status == "stable" and entry.response is None:
            yield self.problem(
                loaded, ("fix",),
                "a stable entry needs a `response` block after `fix`: retry (no|yes|elsewhere|depends) and blame "
                "(code|config|data|environment|node|fabric|storage|scheduler), with a note when retry is depends",
            )
