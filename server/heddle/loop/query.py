"""`query()`: the agent loop as an async generator of core events, ending with a `Terminal`.

One iteration: call the model (streaming; safe tools start as their blocks complete) → if the
model asked for tools, run them and go round again; otherwise stop. Cancellation from the
caller's cancel scope is caught here so the conversation always ends protocol-valid: every
tool_use gets a tool_result, synthetic if need be.
"""

from __future__ import annotations

from contextlib import aclosing
from dataclasses import dataclass, field
from typing import AsyncIterator, Callable
import uuid

import anyio
import anyio.abc

from heddle.loop.events import (CoreEvent, ErrorInfo, ErrorReport, MessageFinal, Retry,
                                Terminal, TerminalReason, TextDelta, ThinkingDelta,
                                ToolCallFinished, ToolCallInput, ToolCallStarted, Usage,
                                UsageReport)
from heddle.loop.messages import (THINKING_TYPES, Block, Message, TextBlock, ThinkingBlock,
                                  ToolUseBlock, append_user, text_of)
from heddle.loop.state import LoopState, next_turn
from heddle.model.types import (BlockDone, BlockStarted, ModelCaller, ModelError,
                                ModelRequest, StreamEnd, TextChunk, ThinkingChunk)
from heddle.permissions.policy import Asker, PermissionPolicy
from heddle.tools.base import Tool, ToolContext, schema_of
from heddle.tools.executor import ToolExecutor

INTERRUPTED = "[The user interrupted the turn here.]"
CANCELLED_RESULT = ("The user cancelled the turn before this tool call finished; "
                    "its effect is unknown.")
MODEL_FAILED_RESULT = ("The model's response failed while this tool call was pending; "
                       "it did not run, or its result was discarded.")


@dataclass(frozen=True)
class LoopDeps:
    """The narrow seams the loop is tested through."""

    model: ModelCaller
    new_id: Callable[[], str] = lambda: uuid.uuid4().hex


@dataclass(frozen=True)
class QueryParams:
    messages: tuple[Message, ...]
    system: str
    model: str
    tools: dict[str, Tool]
    tool_context: ToolContext
    policy: PermissionPolicy
    asker: Asker
    deps: LoopDeps
    task_group: anyio.abc.TaskGroup
    """Where tool calls run; owned by the caller so the generator never yields inside it."""
    source: str = "editor"
    max_turns: int = 100
    max_tokens: int = 8192
    permission_lock: anyio.Lock = field(default_factory=anyio.Lock)


@dataclass(frozen=True)
class LoopConfig:
    """Snapshot taken once at entry; never re-read during the query."""

    model: str
    source: str
    max_turns: int
    max_tokens: int
    tool_schemas: tuple[dict, ...]


def sanitize(blocks: list[Block]) -> tuple[Block, ...]:
    """Make a partial assistant message valid: no empty text, no unsigned or trailing thinking."""
    kept = [b for b in blocks
            if not (isinstance(b, TextBlock) and not b.text.strip())
            and not (isinstance(b, ThinkingBlock) and not b.signature)]
    while kept and isinstance(kept[-1], THINKING_TYPES):
        kept.pop()
    return tuple(kept)


class _Response:
    """What one streamed model response has produced so far."""

    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self.partial_text: list[str] = []
        self.stop_reason: str | None = None
        self.usage = Usage()

    def with_partial(self) -> list[Block]:
        text = "".join(self.partial_text)
        return self.blocks + ([TextBlock(text)] if text else [])


async def query(p: QueryParams) -> AsyncIterator[CoreEvent]:
    config = LoopConfig(p.model, p.source, p.max_turns, p.max_tokens,
                        tuple(schema_of(t) for t in p.tools.values()))
    state = LoopState(messages=p.messages)
    usage = Usage()
    while True:
        if state.turn_count >= config.max_turns:
            yield Terminal(TerminalReason.MAX_TURNS, state.messages, usage,
                           error=ErrorInfo("maxTurns", f"stopped after {config.max_turns} model calls"))
            return
        executor = ToolExecutor(p.tools, p.tool_context, p.policy, p.asker, p.task_group,
                                p.permission_lock)
        response = _Response()
        request = ModelRequest(config.model, p.system, state.messages, config.tool_schemas,
                               state.max_output_tokens_override or config.max_tokens)
        try:
            async with aclosing(p.deps.model.stream(request)) as stream:
                async for ev in stream:
                    for out in _on_stream_event(ev, response, executor, p.tool_context):
                        yield out
        except anyio.get_cancelled_exc_class():
            for out in _aborted(state, response.with_partial(), executor, usage,
                                TerminalReason.ABORTED_STREAMING):
                yield out
            return
        except ModelError as err:
            usage = usage + response.usage
            for out in _model_failed(state, response, executor, usage, err.info):
                yield out
            return
        usage = usage + response.usage
        yield UsageReport(usage)
        assistant = Message("assistant", sanitize(response.blocks))
        if not assistant.content:
            assistant = Message("assistant", (TextBlock("(no answer)"),))
        yield MessageFinal(assistant)
        if not executor.calls:
            yield Terminal(TerminalReason.COMPLETED, state.messages + (assistant,), usage,
                           text=text_of(assistant))
            return
        executor.finish_intake()
        try:
            await executor.wait()
        except anyio.get_cancelled_exc_class():
            for out in _aborted(state, list(assistant.content), executor, usage,
                                TerminalReason.ABORTED_TOOLS):
                yield out
            return
        results = Message("user", executor.results(CANCELLED_RESULT))
        yield MessageFinal(results)
        state = next_turn(state, (assistant, results))


def _on_stream_event(ev, response: _Response, executor: ToolExecutor,
                     ctx: ToolContext) -> list[CoreEvent]:
    if isinstance(ev, TextChunk):
        response.partial_text.append(ev.text)
        return [TextDelta(ev.text)]
    if isinstance(ev, ThinkingChunk):
        return [ThinkingDelta(ev.text)]
    if isinstance(ev, BlockStarted):
        response.partial_text.clear()
        if ev.kind == "tool_use":
            return [ToolCallStarted(ev.tool_use_id, ev.tool_name)]
        return []
    if isinstance(ev, BlockDone):
        response.partial_text.clear()
        response.blocks.append(ev.block)
        if isinstance(ev.block, ToolUseBlock):
            title = _title(executor, ev.block, ctx)
            executor.add(ev.block, ev.input_error)
            return [ToolCallInput(ev.block.id, ev.block.name, ev.block.input, title)]
        return []
    if isinstance(ev, StreamEnd):
        response.stop_reason = ev.stop_reason
        response.usage = ev.usage
        return []
    if isinstance(ev, Retry):
        return [ev]
    return []


def _title(executor: ToolExecutor, block: ToolUseBlock, ctx: ToolContext) -> str:
    import msgspec

    tool = executor.tools.get(block.name)
    if tool is None:
        return block.name
    try:
        return tool.title(msgspec.convert(block.input, tool.input_type), ctx)
    except Exception:  # the title is cosmetic; invalid input is reported when the tool runs
        return block.name


def _close_calls(executor: ToolExecutor, missing: str) -> list[CoreEvent]:
    """Finished events for calls that never started (started ones report their own)."""
    return [ToolCallFinished(c.block.id, c.block.name, "cancelled", "not run")
            for c in executor.calls if not c.started and c.result is None]


def _aborted(state: LoopState, blocks: list[Block], executor: ToolExecutor, usage: Usage,
             reason: TerminalReason) -> list[CoreEvent]:
    out = _close_calls(executor, CANCELLED_RESULT)
    messages = state.messages
    content = sanitize(blocks)
    if content:
        assistant = Message("assistant", content)
        messages += (assistant,)
        out.append(MessageFinal(assistant))
    tail = executor.results(CANCELLED_RESULT) if content else ()
    known = {b.id for b in content if isinstance(b, ToolUseBlock)}
    tail = tuple(r for r in tail if r.tool_use_id in known) + (TextBlock(INTERRUPTED),)
    messages = append_user(messages, tail)
    out.append(MessageFinal(messages[-1]))
    out.append(Terminal(reason, messages, usage, text="".join(
        b.text for b in content if isinstance(b, TextBlock))))
    return out


def _model_failed(state: LoopState, response: _Response, executor: ToolExecutor, usage: Usage,
                  info: ErrorInfo) -> list[CoreEvent]:
    executor._queued.clear()  # queued unsafe calls must not run after a failed response
    out = _close_calls(executor, MODEL_FAILED_RESULT)
    messages = state.messages
    content = sanitize(response.blocks)
    if content:
        assistant = Message("assistant", content)
        messages += (assistant,)
        results = executor.results(MODEL_FAILED_RESULT)
        if results:
            messages = append_user(messages, results)
        out.append(MessageFinal(assistant))
    reason = (TerminalReason.PROMPT_TOO_LONG if info.code == "promptTooLong"
              else TerminalReason.MODEL_ERROR)
    out.append(ErrorReport(info))
    out.append(Terminal(reason, messages, usage, error=info))
    return out


async def drive(events: AsyncIterator[CoreEvent], on_event: Callable[[CoreEvent], None]) -> Terminal:
    """Consume a query to its end, passing each event on; returns the Terminal."""
    async with aclosing(events) as gen:
        async for ev in gen:
            if isinstance(ev, Terminal):
                return ev
            on_event(ev)
    raise RuntimeError("query() ended without a Terminal")
