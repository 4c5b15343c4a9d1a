"""A synthetic 10,000-entry compiled index, to measure how matching and loading scale with the knowledge base.

The entries are not knowledge (their text is generated); they only exercise the index at that size, with the
mix of literal, template and regex signatures that the real knowledge base has.
"""

from __future__ import annotations

from pathlib import Path

from denpex_kb.bundle import FUZZY_FILE, SignatureRow
from denpex_kb.compiler import BUNDLE_FORMAT, anchor_keys, dumps
from denpex_kb.fuzzy import FUZZY_FORMAT, comparable, skeleton
from denpex_kb.model import Signature
from denpex_kb.signatures import compile_signature

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa"]


def make_index(out_dir: Path, n: int) -> Path:
    entries, sigs, known = [], [], []
    for i in range(n):
        w1, w2 = WORDS[i % len(WORDS)], WORDS[(i // len(WORDS)) % len(WORDS)]
        entries.append({"id": f"synthetic-{i}", "title": f"Synthetic failure {i}", "phase": "runtime", "severity": "high",
                        "status": "stable", "tags": ["pytorch"], "fix": "Synthetic fix summary.", "verify": []})
        variants = [
            Signature(kind="literal", text=f"synthetic failure {i} happened"),
            Signature(kind="template", text=f"{w1} {w2} code{i} failed after {{num:step}} steps"),
            Signature(kind="regex", text=rf"stage{i} (?:{w1}|{w2}) error \d+"),
        ]
        for j, sig in enumerate(variants):
            c = compile_signature(sig)
            sigs.append(SignatureRow(i, j, c.pattern, list(c.anchors), c.specificity, "initiating", "stderr", {}, []))
            if sig.kind != "regex":  # as the compiler does: the fixed text of literals and templates
                sk = skeleton(sig.text.replace("{num:step}", "0"))
                if comparable(sk):
                    known.append([i, "initiating", f"signature:{j}", sk])
    sigs = [s._replace(keys=k) for s, k in zip(sigs, anchor_keys([s.anchors for s in sigs]), strict=True)]
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "index.json"
    path.write_text(dumps({"format": BUNDLE_FORMAT, "digest": "synthetic", "entries": entries, "signatures": sigs, "tombstones": {}}))
    (out_dir / FUZZY_FILE).write_text(dumps({"format": FUZZY_FORMAT, "digest": "synthetic", "known": known, "evidence": {}}))
    return path
