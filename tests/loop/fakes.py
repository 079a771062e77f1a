"""Seams for running `query()` in-process: each is a real implementation of the loop's
Protocols (a model that plays back scripted responses, a compactor that writes a fixed
summary, stop hooks that answer from a list, a tool that waits), not a mock of Heddle's own
modules. The tool runner is the daemon's own `Toolbox`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, ClassVar, Iterable

import anyio
import msgspec

from heddle.context.compactor import CompactResult
from heddle.context.pipeline import tokens_of
from heddle.core.events import CoreEvent, ErrorInfo, Terminal, Usage
from heddle.core.messages import Message, TextBlock, ThinkingBlock, ToolUseBlock, user_text
from heddle.core.stream import (BlockDone, BlockStarted, ModelError, ModelRequest, StreamEnd,
                                StreamEvent, TextChunk)
from heddle.core.tools import ToolContext, ToolOutput
from heddle.loop.deps import LoopDeps
from heddle.loop.executor import Toolbox
from heddle.loop.hooks import StopHookOutcome
from heddle.loop.params import LoopConfig, LoopRuntime
from heddle.loop.query import drive, query
from heddle.permissions.policy import PermissionAnswer, PermissionPolicy
from heddle.tools.registry import builtin_tools

USAGE = Usage(input_tokens=100, output_tokens=10)


class Hang:
    """In a scripted response: cancel `scope` here, then wait (the cancel lands in the wait)."""

    def __init__(self, scope: anyio.CancelScope):
        self.scope = scope


def text(words: str, stop: str = "end_turn", usage: Usage = USAGE) -> list[Any]:
    return [BlockStarted(0, "text"), TextChunk(0, words), BlockDone(0, TextBlock(words)),
            StreamEnd(stop, usage)]


def tool(name: str, call_id: str = "t1", stop: str = "tool_use", **inp: Any) -> list[Any]:
    block = ToolUseBlock(call_id, name, inp)
    return [BlockStarted(0, "tool_use", call_id, name), BlockDone(0, block),
            StreamEnd(stop, USAGE)]


def failure(code: str, message: str = "", *, before: Iterable[Any] = ()) -> list[Any]:
    """Stream `before`, then fail for good with `code`."""
    return [*before, ModelError(ErrorInfo(code, message or code))]


class ScriptedModel:
    """A ModelCaller: the n-th request gets the n-th script (the last one repeats)."""

    def __init__(self, *scripts: list[Any]):
        self.scripts = list(scripts)
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        script = self.scripts[min(len(self.requests), len(self.scripts)) - 1]
        for item in script:
            await anyio.lowlevel.checkpoint()
            if isinstance(item, ModelError):
                raise item
            if isinstance(item, Hang):
                item.scope.cancel()
                await anyio.sleep_forever()
            yield item


@dataclass
class Summariser:
    """A Compactor that summarises anything into one short message (or fails, if told to)."""

    fail: bool = False
    reasons: list[str] = field(default_factory=list)

    async def __call__(self, messages: tuple[Message, ...], model: str,
                       reason: str) -> CompactResult:
        self.reasons.append(reason)
        if self.fail:
            raise RuntimeError("the summary model is down")
        summary = (user_text("summary"),)
        return CompactResult(summary, "summary", tokens_of(messages), tokens_of(summary))


@dataclass
class ListedStopHooks:
    """StopHooks that answer from a list, one outcome per time they run."""

    outcomes: list[StopHookOutcome]
    payloads: list[dict] = field(default_factory=list)

    async def __call__(self, payload: dict[str, Any]) -> StopHookOutcome:
        self.payloads.append(payload)
        return self.outcomes.pop(0)


class HoldInput(msgspec.Struct):
    pass


class Hold:
    """A tool that cancels `scope` when it runs and waits to be cancelled (it runs after the
    response ended: it is not concurrency-safe)."""

    name: ClassVar[str] = "Hold"
    description: ClassVar[str] = "Waits."
    input_type = HoldInput
    concurrency_safe = False
    read_only = True
    max_result_chars = 1000

    def __init__(self, scope: anyio.CancelScope):
        self.scope = scope

    def title(self, inp, ctx):
        return "Hold"

    def normalise(self, inp, ctx):
        return inp

    async def preview(self, inp, ctx):
        return None

    def rule_for(self, inp, ctx):
        return "Hold"

    async def run(self, inp: HoldInput, ctx: ToolContext) -> ToolOutput:
        self.scope.cancel()
        await anyio.sleep_forever()
        raise AssertionError("not reached")


async def _never_asked(prompt) -> PermissionAnswer:
    raise AssertionError("bypassPermissions never asks")


def first_prompt(rounds: int = 0) -> tuple[Message, ...]:
    """A conversation with `rounds` finished rounds of thinking and text, then a prompt."""
    messages: tuple[Message, ...] = (user_text("start"),)
    for i in range(rounds):
        messages += (Message("assistant", (ThinkingBlock(f"thought {i}", "sig"),
                                           TextBlock(f"answer {i} " + "x" * 400))),
                     user_text(f"question {i + 1}"))
    return messages


@dataclass
class Run:
    terminal: Terminal
    events: list[CoreEvent]

    def of(self, kind: type) -> list:
        return [e for e in self.events if isinstance(e, kind)]


async def run_query(workspace: Path, model: ScriptedModel, messages: tuple[Message, ...] = (),
                    *, tools: dict | None = None, abort_reason: str | None = None,
                    scope: anyio.CancelScope | None = None,
                    permissions: PermissionPolicy | None = None, **seams_and_config: Any) -> Run:
    """Run one query to its Terminal, inside `scope` if given (a test may cancel it). Tools
    run unasked (`bypassPermissions`) unless `permissions` says otherwise."""
    events: list[CoreEvent] = []
    config_fields = {k: v for k, v in seams_and_config.items()
                     if k in LoopConfig.__dataclass_fields__}
    seams = {k: v for k, v in seams_and_config.items() if k not in config_fields}
    config = LoopConfig(system="You are tested.", model="main-model", **config_fields)
    toolbox = Toolbox(builtin_tools() if tools is None else tools,
                      ToolContext(workspace, emit=events.append), _never_asked)
    deps = LoopDeps(model, toolbox, permissions or PermissionPolicy(mode="bypassPermissions"),
                    **seams)
    terminal = None
    with scope or anyio.CancelScope():
        async with anyio.create_task_group() as tg:
            run = LoopRuntime(tg, emit=events.append, abort_reason=lambda: abort_reason)
            terminal = await drive(query(messages or first_prompt(), config, deps, run),
                                   events.append)
    assert terminal is not None
    return Run(terminal, events)
