"""What a query runs with besides its seams: the frozen configuration, and the runtime handles
of this one call (its task group, where out-of-band events go, the turn's queued prompts)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol, runtime_checkable

import anyio.abc

from heddle.context.pipeline import PipelineSettings
from heddle.context.windows import Limits
from heddle.core.events import CoreEvent
from heddle.core.messages import Block
from heddle.loop.repeats import RepeatLimits
from heddle.loop.thinking import ThinkingChoice


@dataclass(frozen=True)
class LoopConfig:
    """Fixed for the whole query; never re-read while it runs."""

    system: str
    model: str
    source: str = "editor"
    """`editor`, `agent:<name>` for sub-agents, `compact` for compaction."""
    max_turns: int = 100
    max_tokens: int = 8192
    """`max_tokens` of each call's answer, or the model's maximum output where that is lower;
    an answer cut off by it is asked again once with the model's maximum. A call that thinks
    asks for the thinking's room on top (`heddle.loop.thinking`)."""
    fallback_model: str | None = None
    token_budget: int | None = None
    """Keep working until this many output tokens (a `+500k` request); None: off."""
    task_budget: int | None = None
    """Hard cap on input+output tokens of the whole query; None: off."""
    thinking: ThinkingChoice = ThinkingChoice()
    """Off unless the caller says otherwise (a session's turns: its choice, auto by default)."""
    summary_model: str | None = None
    """Cheap model that labels each tool batch in the background; None: off."""
    limits: Limits | None = None
    """Of `model`; None: `limits_for(model)`."""
    limits_for: Callable[[str], Limits] | None = None
    """The limits of any model the query may call (a fallback model too); None: the built-in
    table's (`heddle.model.limits`)."""
    pipeline: PipelineSettings = PipelineSettings()
    cache_ttl: str | None = None
    """Prompt-cache breakpoints with this lifetime (`5m`, `1h`); None: no `cache_control`."""
    cache_cold: bool = False
    """The session's last model call is longer ago than the cache lifetime: the first call
    re-writes the cache anyway, so the context pipeline may cut old content for free."""
    repeats: RepeatLimits = RepeatLimits()
    """When the repeat guard warns the model and refuses a call (`heddle.loop.repeats`)."""

    @property
    def is_subagent(self) -> bool:
        return self.source.startswith("agent:")


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


def _nobody(event: CoreEvent) -> None:
    pass


def _no_abort_reason() -> str | None:
    return None


@dataclass(frozen=True)
class LoopRuntime:
    """The handles of this one call of `query()`."""

    task_group: anyio.abc.TaskGroup
    """Where tool calls and background work run; owned by the caller so the generator never
    yields inside it."""
    emit: Callable[[CoreEvent], None] = _nobody
    """Where events from background work go (tool summaries), outside the generator."""
    outlet: Outlet | None = None
    """Where the events go, if it can ask the turn to pause while its reader is behind."""
    take_queued: Callable[[], tuple[Block, ...]] | None = None
    """Prompts queued while the turn runs; they join at the next iteration boundary."""
    abort_reason: Callable[[], str | None] = _no_abort_reason
    """After a cancel: "interrupt" when a new prompt replaced the turn (no interruption note)."""
