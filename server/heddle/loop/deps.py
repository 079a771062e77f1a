"""The loop's injectable dependencies: five narrow seams (the model caller, the compactor, the
microcompactor, the id generator, the stop hooks) and nothing else."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Callable, Protocol, runtime_checkable

from heddle.context.compactor import Compactor, Microcompactor
from heddle.core.stream import ModelCaller
from heddle.loop.hooks import StopHooks


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


@runtime_checkable
class Outlet(Protocol):
    """Where a turn's events go, when it can say that its reader is not keeping up.

    While `behind` is true after an event, the model call waits for `writable()` before it
    reads on, so the model's stream stops being read (its connection's window fills and the
    server waits) and what the daemon holds for a stalled editor stops growing. The wait is
    inside the model call, so a cancel during it ends the call like any other cancel: what was
    streamed is kept and every tool call gets a result.
    """

    @property
    def behind(self) -> bool: ...

    async def writable(self) -> None: ...
