"""The loop's seams, passed in and never chosen inside it: the model caller, the tool runner, the
permission decider, the compactor, the microcompactor and the stop hooks.

`heddle.sessions.turns` chooses the concrete ones for a turn (the Anthropic model, a `Toolbox`
of the built-in tools, the session's `PermissionPolicy`, ...); tests choose their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, Sequence

import anyio.abc

from heddle.context.compactor import Compactor, Microcompactor
from heddle.core.events import CoreEvent
from heddle.core.messages import ToolResultBlock, ToolUseBlock
from heddle.core.stream import ModelCaller
from heddle.core.tools import Tool, ToolContext
from heddle.loop.hooks import StopHooks
from heddle.loop.repeats import Loop, Repeats
from heddle.permissions.policy import Asker, Decision, Rule
from heddle.settings import HookSettings


class PermissionDecider(Protocol):
    """Who says whether a tool call may run: its rules and mode, the hooks around each call,
    and where an "allow always" answer keeps its rule (`PermissionPolicy`)."""

    @property
    def mode(self) -> str: ...

    @property
    def hooks(self) -> HookSettings: ...

    def decide(self, tool: Tool, inp: Any, ctx: ToolContext, hook: str | None = None,
               hook_reason: str | None = None) -> Decision: ...

    def add(self, rule: Rule) -> Rule:
        """Keep `rule`; RuleError if it does not parse, SettingsWriteError if it cannot be
        saved where its scope says."""
        ...


class ToolBatch(Protocol):
    """The tool calls of one model response, started while it still streams."""

    stop_reason: str | None
    """Set when a hook asked to end the turn after this batch."""
    repeats: Repeats
    """The repeat guard's count, with the calls of this batch that finished."""
    caught: tuple[ToolUseBlock, Loop] | None
    """The first call the repeat guard refused, and the repetition it would have made."""

    @property
    def blocks(self) -> Sequence[ToolUseBlock]:
        """The calls received so far, in request order."""
        ...

    def begin(self, block_id: str, tool: str) -> None:
        """A tool_use block started streaming; `add` follows once its input is complete."""

    def add(self, block: ToolUseBlock, input_error: str | None = None) -> None:
        """A tool_use block is complete: start it if it may run now."""

    def title(self, block: ToolUseBlock) -> str:
        """What the editor shows for the call (its name when the input does not convert)."""
        ...

    def finish_intake(self) -> None:
        """The response ended: run what waits, in order."""

    async def wait(self) -> None:
        """Until every call has finished."""

    def results(self, missing: str) -> tuple[ToolResultBlock, ...]:
        """One result per call in request order; a call without one gets `missing`."""
        ...

    def discard(self, why: str, running: bool = False, finished: bool = False
                ) -> list[CoreEvent]:
        """The response is thrown away: calls that have not started never will (nor a call
        whose input was still streaming); with `running`, started read-only calls are stopped;
        with `finished`, the finished ones are dropped too. Returns a `ToolCallFinished`,
        `cancelled`, for each call ended so."""
        ...


class ToolRunner(Protocol):
    """The tools of a query: what the model is offered, and a batch per model response."""

    def schemas(self) -> tuple[dict[str, Any], ...]: ...

    def batch(self, task_group: anyio.abc.TaskGroup, permissions: PermissionDecider,
              repeats: Repeats | None = None) -> ToolBatch:
        """Calls run in `task_group` (the caller's), each decided on by `permissions`, and
        counted by the repeat guard from `repeats` (None: no guard)."""
        ...


@dataclass(frozen=True)
class LoopDeps:
    model: ModelCaller
    tools: ToolRunner
    permissions: PermissionDecider
    compactor: Compactor | None = None
    """None: no model compaction."""
    microcompactor: Microcompactor | None = None
    """None: `heddle.context.pipeline.microcompact`."""
    stop_hooks: StopHooks | None = None
    """None: no stop hooks."""
    loop_asker: Asker | None = None
    """Asks the user whether a turn the repeat guard caught may go on (a `PermissionPrompt`
    with `loop`); None: nobody can be asked, and such a turn ends."""
