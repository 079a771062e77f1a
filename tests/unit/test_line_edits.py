"""The line-granular TextEdits the daemon sends in `workspace/applyEdit`."""

from __future__ import annotations

import random

import msgspec

from buffers import apply_edits
from heddle.rpc.editor import line_edits, lsp_lines


def edits(before: str, after: str, encoding: str = "utf-16") -> list[dict]:
    return msgspec.to_builtins(line_edits(before, after, encoding))


def test_one_edit_per_changed_region_at_line_starts():
    before = "a\nb\nc\nd\ne\n"
    assert edits(before, "a\nB\nc\nd\ne\nf\n") == [
        {"range": {"start": {"line": 1, "character": 0}, "end": {"line": 2, "character": 0}},
         "newText": "B\n"},
        {"range": {"start": {"line": 5, "character": 0}, "end": {"line": 5, "character": 0}},
         "newText": "f\n"}]


def test_a_last_line_without_a_newline_ends_at_its_length_in_the_encoding():
    before = "x\nnaïve 😀"
    want = {"utf-16": 8, "utf-8": 11, "utf-32": 7}  # the emoji is 2 UTF-16 units
    for encoding, width in want.items():
        (edit,) = edits(before, "x\nplain\n", encoding)
        assert edit["range"] == {"start": {"line": 1, "character": 0},
                                 "end": {"line": 1, "character": width}}


def test_lines_are_counted_as_lsp_counts_them():
    assert lsp_lines("a\u2028b\x0cc\r\nd\re") == ["a\u2028b\x0cc\r\n", "d\r", "e"]
    (edit,) = edits("a\u2028b\nc\n", "a\u2028b\nC\n")
    assert edit["range"]["start"] == {"line": 1, "character": 0}


def test_applying_the_edits_gives_the_new_text():
    rng = random.Random(16)
    words = ["a\n", "b\n", "c", "\r\n", "é\n", "😀\n", "\n"]
    for _ in range(500):
        before = "".join(rng.choices(words, k=rng.randrange(0, 25)))
        after = "".join(rng.choices(words, k=rng.randrange(0, 25)))
        assert apply_edits(before, edits(before, after)) == after, (before, after)
