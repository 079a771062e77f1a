"""Counts in words, for what people read: `1 line`, `2 lines`."""

from __future__ import annotations


def plural(count: int, word: str, words: str | None = None) -> str:
    """The count and the word that agrees with it (`words`: a plural other than word + s)."""
    return f"{count:,} {word if count == 1 else words or word + 's'}"
