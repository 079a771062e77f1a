"""Text made safe to show on one line: the titles of tool calls and permission prompts.

A title is made from input the model invented (a path, a command, a pattern), so it may hold a
newline that fakes a second line of the prompt, a terminal escape, or a bidirectional override
(U+202E) that shows `txt.exe` as `exe.txt`. Every control, format (bidi, zero-width), line or
paragraph separator character is written as a visible escape instead (`\\n`, `\\u202e`), so what
the user reads is what the call does, and a title stays one line of bounded length.
"""

from __future__ import annotations

import unicodedata

MAX_TITLE = 500
"""Longest title shown (characters); a longer one ends in `…`."""

_HIDDEN = {"Cc", "Cf", "Zl", "Zp", "Cs"}
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(ch: str) -> str:
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 \
        else f"\\U{code:08x}"


def one_line(text: str, limit: int = MAX_TITLE) -> str:
    """`text` with every control, bidi/format and separator character escaped, cut to `limit`
    characters."""
    if text.isprintable() and len(text) <= limit:  # the common case, at C speed
        return text
    shown = "".join(_escape(ch) if unicodedata.category(ch) in _HIDDEN else ch for ch in text)
    return shown if len(shown) <= limit else shown[:limit - 1] + "…"
