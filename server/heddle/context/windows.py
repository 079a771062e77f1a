"""A model's context window, output limit and thinking, and the thresholds derived from them
(the numbers of each model are in `heddle.model.limits`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import msgspec

from heddle.core.stream import ThinkingSupport

OUTPUT_RESERVE_CAP = 20_000
AUTO_COMPACT_BUFFER = 13_000
BLOCKING_BUFFER = 3_000


@dataclass(frozen=True)
class Limits:
    window: int
    max_output: int
    thinking: ThinkingSupport | None = None
    """How the model thinks; None: not known."""

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


def estimate_tokens(value: object) -> int:
    """A deliberately high estimate (3.5 characters of JSON per token): compaction should fire
    a little early, never late."""
    return math.ceil(len(msgspec.json.encode(value)) / 3.5)
