"""The loop's injectable dependencies: four narrow seams and nothing else."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Callable, Protocol

from heddle.loop.hooks import StopHooks
from heddle.loop.messages import Message
from heddle.model.types import ModelCaller


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


def _new_id() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True)
class LoopDeps:
    model: ModelCaller
    compactor: Compactor | None = None
    microcompactor: Microcompactor | None = None
    """None: `heddle.context.pipeline.microcompact`."""
    new_id: Callable[[], str] = field(default=_new_id)
    stop_hooks: StopHooks | None = None
