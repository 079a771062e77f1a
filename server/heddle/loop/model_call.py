"""One model call of an iteration, streamed: safe tools start as their blocks complete, a
response that broke off is dropped and streamed again, and an overloaded model falls back once.

A response that broke off after some of it was shown (the model caller's `Restart`) is
dropped whole: its tool calls end `cancelled` (a read-only one that had started is stopped, and
one that had finished is reported again, since the model never sees its result), its output
is tombstoned, and the new response is a model call of its own index. Its tokens still count
in the turn's usage, as do those of a call that failed for good: they are billed too (the model
caller adds them to its `StreamEnd`, or to its `ModelError`).

`call_model` yields the call's events and last `Onward` with the state after the call and the
`Call`, which the rest of the iteration reads. A cancel while streaming is not an error here:
the call ends `aborted`, and the conversation is closed after it.
"""

from __future__ import annotations

from contextlib import aclosing
from dataclasses import replace
from typing import AsyncIterator

import anyio

from heddle.context.pipeline import server_clearing
from heddle.core.events import (CoreEvent, ModelCallStarted, ModelFallback, Retry, TextDelta,
                                ThinkingDelta, ThinkingDone, Tombstone, ToolCallInput,
                                ToolCallStarted, Usage)
from heddle.core.messages import THINKING_TYPES, Message, ToolUseBlock, strip_thinking
from heddle.core.stream import (Billed, BlockDone, BlockStarted, ModelError, ModelRequest, Restart,
                                StreamEnd, TextChunk, ThinkingChunk)
from heddle.loop.deps import ToolBatch
from heddle.loop.ladder import max_tokens
from heddle.loop.outcomes import Call, Onward, Query, Response
from heddle.loop.state import LoopState
from heddle.loop.thinking import call_thinking

BROKE_OFF = "the model's response broke off and is being written again"


async def call_model(q: Query, now: Onward) -> AsyncIterator[CoreEvent | Onward]:
    state = now.state
    model, messages, index = state.model, state.messages, state.calls
    failed = Usage()  # what the requests of failed calls reported (a fallback's first model)
    while True:
        batch = q.deps.tools.batch(q.run.task_group, q.deps.permissions, state.repeats)
        response = Response()
        yield ModelCallStarted(index, model)
        request = _request(q, state, model, messages)
        index += 1
        try:
            async with aclosing(q.deps.model.stream(request)) as stream:
                async for ev in stream:
                    if isinstance(ev, Restart):
                        for out in _dropped(batch, index - 1, ev):
                            yield out
                        batch = q.deps.tools.batch(q.run.task_group, q.deps.permissions,
                                                   state.repeats)
                        response = Response()
                        yield ModelCallStarted(index, model)
                        index += 1
                        continue
                    for out in _on_stream_event(ev, response, batch):
                        yield out
                    if q.run.outlet is not None and q.run.outlet.behind:
                        await q.run.outlet.writable()  # the editor is behind: read on later
        except anyio.get_cancelled_exc_class():
            call = Call("aborted", response, batch)
        except ModelError as err:
            failed += err.usage  # billed although the call failed (all of its requests)
            response.usage = Usage()  # what `Billed` said so far is part of that
            fallback = q.config.fallback_model
            if err.info.code == "overloaded" and fallback and model != fallback:
                for ev in batch.discard("the model was switched", running=True, finished=True):
                    yield ev
                yield Tombstone(index - 1, f"{model} is overloaded; switching to {fallback}")
                yield ModelFallback(model, fallback, err.info)
                model, messages = fallback, strip_thinking(messages)
                continue
            call = Call("failed", response, batch, err.info)
        else:
            call = Call("ok", response, batch)
        yield Onward(called(state, model, messages, index, response.usage + failed), call)
        return


def _request(q: Query, state: LoopState, model: str,
             messages: tuple[Message, ...]) -> ModelRequest:
    limits = q.limits_of(model)
    thinking = call_thinking(q.config.thinking, limits.thinking,
                             max_tokens(q.config, state, limits.max_output), limits.max_output)
    return ModelRequest(model, q.config.system, messages, q.tool_schemas, thinking.max_tokens,
                        thinking.thinking, thinking.effort, q.config.cache_ttl,
                        server_clearing(messages, q.limits, q.config.pipeline))


def called(state: LoopState, model: str, messages: tuple[Message, ...], calls: int,
           usage: Usage) -> LoopState:
    """After a model call: its usage counts, and a fallback model takes over for the rest of
    the turn (with the conversation it was sent, thinking stripped)."""
    if model != state.model:
        state = replace(state, model=model, messages=messages)
    return replace(state, calls=calls, usage=state.usage + usage)


def _dropped(batch: ToolBatch, index: int, restart: Restart) -> list[CoreEvent]:
    """The response of model call `index` broke off and is requested again: its tool calls
    end `cancelled`, then its output is tombstoned."""
    return batch.discard(BROKE_OFF, running=True, finished=True) + [Tombstone(
        index, f"the model's response broke off ({restart.error.message}); it is being "
        "written again")]


def _on_stream_event(ev, response: Response, batch: ToolBatch) -> list[CoreEvent]:
    if isinstance(ev, TextChunk):
        response.partial_text.append(ev.text)
        return [TextDelta(ev.text)]
    if isinstance(ev, ThinkingChunk):
        return [ThinkingDelta(ev.text)]
    if isinstance(ev, BlockStarted):
        response.partial_text.clear()
        if ev.kind == "tool_use":
            batch.begin(ev.tool_use_id, ev.tool_name)
            return [ToolCallStarted(ev.tool_use_id, ev.tool_name)]
        return []
    if isinstance(ev, BlockDone):
        response.partial_text.clear()
        response.blocks.append(ev.block)
        if isinstance(ev.block, ToolUseBlock):
            title = batch.title(ev.block)
            batch.add(ev.block, ev.input_error)
            return [ToolCallInput(ev.block.id, ev.block.name, ev.block.input, title)]
        if isinstance(ev.block, THINKING_TYPES):
            tools = sum(isinstance(b, ToolUseBlock) for b in response.blocks)
            return [ThinkingDone(ev.block, tools)]
        return []
    if isinstance(ev, Billed):  # what counts if the call is cancelled before it ends
        response.usage = ev.usage
        return []
    if isinstance(ev, StreamEnd):
        response.stop_reason = ev.stop_reason
        response.usage = ev.usage
        return []
    if isinstance(ev, Retry):
        return [ev]
    return []
