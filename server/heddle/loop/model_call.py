"""One model call of an iteration: stream it, start safe tools early, fall back once.

`call_model` is a sub-generator: it yields the call's events, and last a `CallOutcome` that
the loop keeps to itself.
"""

from __future__ import annotations

from contextlib import aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING, AsyncIterator

import anyio
import msgspec

from heddle.core.events import (CoreEvent, ErrorInfo, ModelCallStarted, ModelFallback, Retry,
                                TextDelta, ThinkingDelta, ToolCallInput, ToolCallStarted, Usage)
from heddle.core.messages import Block, Message, TextBlock, ToolUseBlock, strip_thinking
from heddle.core.stream import (BlockDone, BlockStarted, ModelError, ModelRequest, StreamEnd,
                                TextChunk, ThinkingChunk)
from heddle.core.tools import ToolContext
from heddle.loop.endings import discard, tombstone
from heddle.loop.executor import ToolExecutor
from heddle.loop.state import LoopState

if TYPE_CHECKING:
    from heddle.loop.query import LoopConfig, QueryParams


class Response:
    """What one streamed model response has produced so far."""

    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self.partial_text: list[str] = []
        self.stop_reason: str | None = None
        self.usage = Usage()

    def with_partial(self) -> list[Block]:
        text = "".join(self.partial_text)
        return self.blocks + ([TextBlock(text)] if text else [])


@dataclass
class CallOutcome:
    status: str
    """`ok`, `aborted` (cancelled while streaming) or `failed`."""
    response: Response
    executor: ToolExecutor
    model: str
    messages: tuple[Message, ...]
    next_index: int
    error: ErrorInfo | None = None


async def call_model(p: QueryParams, config: LoopConfig, state: LoopState,
                     index: int) -> AsyncIterator[CoreEvent | CallOutcome]:
    model, messages = state.model, state.messages
    while True:
        executor = ToolExecutor(p.tools, p.tool_context, p.policy, p.asker, p.task_group,
                                p.permission_lock)
        response = Response()
        yield ModelCallStarted(index, model)
        request = ModelRequest(model, p.system, messages, config.tool_schemas,
                               state.max_output_tokens_override or config.max_tokens,
                               config.thinking_budget)
        try:
            async with aclosing(p.deps.model.stream(request)) as stream:
                async for ev in stream:
                    for out in _on_stream_event(ev, response, executor, p.tool_context):
                        yield out
                    if p.outlet is not None and p.outlet.behind:
                        await p.outlet.writable()  # the editor is behind: read on later
        except anyio.get_cancelled_exc_class():
            yield CallOutcome("aborted", response, executor, model, messages, index + 1)
            return
        except ModelError as err:
            fallback = config.fallback_model
            if err.info.code == "overloaded" and fallback and model != fallback:
                for ev in discard(executor, "the model was switched"):
                    yield ev
                yield tombstone(index, f"{model} is overloaded; switching to {fallback}")
                yield ModelFallback(model, fallback, err.info)
                model, messages, index = fallback, strip_thinking(messages), index + 1
                continue
            yield CallOutcome("failed", response, executor, model, messages, index + 1, err.info)
            return
        yield CallOutcome("ok", response, executor, model, messages, index + 1)
        return


def _on_stream_event(ev, response: Response, executor: ToolExecutor,
                     ctx: ToolContext) -> list[CoreEvent]:
    if isinstance(ev, TextChunk):
        response.partial_text.append(ev.text)
        return [TextDelta(ev.text)]
    if isinstance(ev, ThinkingChunk):
        return [ThinkingDelta(ev.text)]
    if isinstance(ev, BlockStarted):
        response.partial_text.clear()
        if ev.kind == "tool_use":
            executor.begin(ev.tool_use_id, ev.tool_name)
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
    tool = executor.tools.get(block.name)
    if tool is None:
        return block.name
    try:
        return tool.title(msgspec.convert(block.input, tool.input_type), ctx)
    except Exception:  # the title is cosmetic; invalid input is reported when the tool runs
        return block.name
