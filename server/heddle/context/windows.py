"""Context windows and output limits per model, and the thresholds derived from them."""

from __future__ import annotations

import math
from dataclasses import dataclass

import msgspec

DEFAULT_WINDOW = 200_000
DEFAULT_MAX_OUTPUT = 32_000
# Longest matching prefix wins. (context window, maximum output tokens)
MODELS: dict[str, tuple[int, int]] = {
    "claude-opus-4": (200_000, 32_000),
    "claude-sonnet-4": (200_000, 64_000),
    "claude-haiku-4": (200_000, 64_000),
    "claude-3-7-sonnet": (200_000, 64_000),
    "claude-3-5-haiku": (200_000, 8_192),
}
OUTPUT_RESERVE_CAP = 20_000
AUTO_COMPACT_BUFFER = 13_000
BLOCKING_BUFFER = 3_000


@dataclass(frozen=True)
class Limits:
    window: int
    max_output: int

    @property
    def effective(self) -> int:
        """The window minus what is kept free for the answer."""
        return self.window - min(self.max_output, OUTPUT_RESERVE_CAP)

    @property
    def auto_compact_at(self) -> int:
        return self.effective - AUTO_COMPACT_BUFFER

    @property
    def blocking_at(self) -> int:
        return self.effective - BLOCKING_BUFFER


def limits_for(model: str, overrides: dict[str, tuple[int, int]] | None = None) -> Limits:
    table = {**MODELS, **(overrides or {})}
    best = max((p for p in table if model.startswith(p)), key=len, default=None)
    window, max_output = table[best] if best else (DEFAULT_WINDOW, DEFAULT_MAX_OUTPUT)
    return Limits(window, max_output)


def estimate_tokens(value: object) -> int:
    """A deliberately high estimate (3.5 characters of JSON per token): compaction should fire
    a little early, never late."""
    return math.ceil(len(msgspec.json.encode(value)) / 3.5)
