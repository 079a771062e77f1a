"""An editor's buffer for tests: applies LSP TextEdits the way an editor does."""

from __future__ import annotations

import re

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def _offset(lines: list[str], pos: dict) -> int:
    """The string offset of an LSP position (UTF-16 code units)."""
    line, units = pos["line"], pos["character"]
    start = sum(len(s) for s in lines[:line])
    text = lines[line] if line < len(lines) else ""
    at = 0
    while units > 0 and at < len(text):
        units -= 2 if ord(text[at]) > 0xFFFF else 1
        at += 1
    return start + at


def apply_edits(text: str, edits: list[dict]) -> str:
    """`text` with `edits` applied; every range refers to `text` as it was, and they must
    not overlap (as LSP requires)."""
    lines = _LINE.findall(text)
    spans = sorted(((_offset(lines, e["range"]["start"]), _offset(lines, e["range"]["end"]),
                     e["newText"]) for e in edits), reverse=True)
    for (start, end, _), (next_start, _, _) in zip(spans[1:], spans):
        assert end <= next_start, f"overlapping edits: {edits}"
    for start, end, new in spans:
        assert start <= end, f"an edit ends before it starts: {edits}"
        text = text[:start] + new + text[end:]
    return text
