"""The compaction seams: what the context pipeline asks of whoever summarises a conversation.

The loop passes them in (`LoopDeps`); `heddle.loop.compact.ModelCompactor` is the one that asks
the model, and the pipeline has its own microcompactor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from heddle.core.messages import Message


@dataclass(frozen=True)
class CompactResult:
    messages: tuple[Message, ...]
    summary: str
    tokens_before: int
    tokens_after: int


class Compactor(Protocol):
    async def __call__(self, messages: tuple[Message, ...], model: str,
                       reason: str) -> CompactResult:
        """Summarise the history into a shorter conversation that keeps the task.
        Raises on failure."""
        ...


class Microcompactor(Protocol):
    def __call__(self, messages: tuple[Message, ...], tokens: int, target: int,
                 keep: int) -> tuple[tuple[Message, ...], int]:
        """Clear old tool results until about `target` tokens remain, never the `keep` most
        recent; returns the messages and how many results were cleared."""
        ...
