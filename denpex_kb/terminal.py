"""Printing untrusted text (log lines, file names, knowledge-base fields) to a terminal.

A log line can carry escape sequences that a terminal obeys: OSC 52 writes the clipboard, OSC 0 sets the
window title, `ESC c` resets the terminal, DCS talks to the terminal itself, and bidi overrides reorder what
the reader sees. Every string `scan`, `match`, `explain` and `list` print from such a source goes through
`visible`, which shows each control character as an escape (`\\x1b`, `\\u202e`) instead of sending it.
"""

from __future__ import annotations

import re

# C0 controls except tab, DEL, C1 controls (8-bit CSI, OSC, DCS...), bidi embeddings, overrides and isolates,
# and the Unicode line and paragraph separators.
_CONTROL = "\x00-\x08\x0a-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\u061c"
_UNSAFE = re.compile(f"[{_CONTROL}]")
_UNSAFE_KEEP_NEWLINE = re.compile(f"[{_CONTROL.replace(chr(0x0a) + '-', chr(0x0b) + '-')}]")
# In JSON text, json.dumps already escapes C0 controls; these are what ensure_ascii=False leaves raw.
_JSON_RAW = re.compile("[\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\u061c]")


def _escape(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: object, *, keep_newlines: bool = False) -> str:
    """`text` with every control character shown as an escape. keep_newlines: for multi-line output that is
    ours (an entry rendered for the terminal), line breaks stay; everything else is still escaped."""
    s = str(text)
    return (_UNSAFE_KEEP_NEWLINE if keep_newlines else _UNSAFE).sub(_escape, s)


def json_safe(dumped: str) -> str:
    """JSON text (from json.dumps(..., ensure_ascii=False)) with the controls it leaves raw as \\u escapes:
    still the same JSON value, and harmless on a terminal."""
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", dumped)
