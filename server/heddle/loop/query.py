"""`query()`: the agent loop as an async generator of core events, ending with a `Terminal`.

One iteration: guards (max turns, task budget, blocking limit) → one model call, streaming
(safe tools start as their blocks complete; an overloaded primary model falls back once) →
recovery if the call failed or was cut off → stop hooks and the token budget if the model is
done → otherwise run the tools and go round. Every `continue` builds a complete new LoopState
whose `transition` says why. Cancellation from the caller's cancel scope is caught where it
lands, and the conversation is closed so the next request is valid: every tool_use gets a
tool_result, synthetic if need be.

What the query runs with comes in three parts: the frozen configuration (`LoopConfig`), the
seams (`LoopDeps`: the model caller, the tool runner, the permission decider, ...) and this
call's runtime handles (`LoopRuntime`).
"""

from __future__ import annotations

import logging
from contextlib import aclosing
from dataclasses import replace
from typing import AsyncIterator, Callable

import anyio

from heddle.context.pipeline import collapse_drain, prepare
from heddle.context.windows import estimate_tokens, limits_for
from heddle.core.events import (Compaction, CoreEvent, ErrorInfo, ErrorReport, MessageFinal,
                                Terminal, TerminalReason, Tombstone, UsageReport)
from heddle.core.messages import Message, TextBlock, append_user, text_of, to_api, user_text
from heddle.loop import endings
from heddle.loop.budget import check_token_budget
from heddle.loop.deps import LoopDeps
from heddle.loop.model_call import call_model
from heddle.loop.outcomes import Onward, Query
from heddle.loop.params import LoopConfig, LoopRuntime
from heddle.loop.state import ContinueReason, LoopState, next_turn, rebuilt
from heddle.loop.summaries import Background, summarize_tools

log = logging.getLogger(__name__)

MAX_OUTPUT_TOKENS_RECOVERY_LIMIT = 3
OUTPUT_LIMIT_NUDGE = ("Output token limit hit. Resume directly where you stopped - no apology, "
                      "no recap. Split the remaining work into smaller pieces.")


def context_tokens(state: LoopState) -> int:
    """The last response's reported size plus a high estimate of what came after it."""
    counted, tokens = state.context_base
    return tokens + estimate_tokens(to_api(state.messages[counted:]))


async def query(messages: tuple[Message, ...], config: LoopConfig, deps: LoopDeps,
                run: LoopRuntime) -> AsyncIterator[CoreEvent]:
    """Run the loop on `messages` until it ends; the last item is the Terminal."""
    background = Background(run.task_group)
    q = Query(config, deps, run, config.limits or limits_for(config.model),
              deps.tools.schemas(), background)
    try:
        async with aclosing(_loop(q, LoopState(messages=messages, model=config.model))) as loop:
            async for ev in loop:
                yield ev
    finally:
        background.close()


async def _loop(q: Query, state: LoopState) -> AsyncIterator[CoreEvent]:
    config, limits = q.config, q.limits
    transitions: list[str] = []

    def end(reason: TerminalReason, messages: tuple[Message, ...], text: str = "",
            error: ErrorInfo | None = None) -> list[CoreEvent]:
        return ([ErrorReport(error)] if error else []) + [
            Terminal(reason, messages, state.usage, text, error, tuple(transitions))]

    while True:
        if state.transition is not None:
            transitions.append(state.transition.reason.value)
        if state.turn_count >= config.max_turns:
            for ev in end(TerminalReason.MAX_TURNS, state.messages, error=ErrorInfo(
                    "maxTurns", f"stopped after {config.max_turns} model calls")):
                yield ev
            return
        spent = state.usage.input_tokens + state.usage.output_tokens
        if config.task_budget and spent >= config.task_budget:
            for ev in end(TerminalReason.TOKEN_BUDGET, state.messages, error=ErrorInfo(
                    "tokenBudget", f"the task budget of {config.task_budget:,} tokens is spent "
                    f"({spent:,} used)")):
                yield ev
            return
        size = context_tokens(state)
        try:
            messages, size, compactions = await prepare(
                state.messages, size, limits, state.model,
                q.deps.compactor if config.source != "compact" else None, config.pipeline,
                q.deps.microcompactor)
        except anyio.get_cancelled_exc_class():
            for ev in _cancelled(q, state, TerminalReason.ABORTED_STREAMING, end):
                yield ev
            return
        for ev in compactions:
            yield ev
        if compactions:
            state = replace(state, messages=messages, context_base=(len(messages), size))
        if config.source != "compact" and size > limits.blocking_at:
            for ev in end(TerminalReason.BLOCKING_LIMIT, state.messages, error=ErrorInfo(
                    "blockingLimit", f"the conversation (about {size:,} tokens) is too close to "
                    f"the context window of {limits.window:,}; compact it or start a new "
                    "session")):
                yield ev
            return

        called: Onward | None = None
        async with aclosing(call_model(q, Onward(state))) as call:
            async for ev in call:
                if isinstance(ev, Onward):
                    called = ev
                else:
                    yield ev
        assert called is not None and called.call is not None
        state, outcome = called.state, called.call
        response, batch = outcome.response, outcome.batch

        if outcome.status == "aborted":
            events, messages, text = endings.aborted(state.messages, response.with_partial(),
                                                     batch, q.run.abort_reason())
            for ev in events + end(TerminalReason.ABORTED_STREAMING, messages, text):
                yield ev
            return
        if outcome.status == "failed":
            info = outcome.error
            too_long = info.code == "promptTooLong" and q.deps.compactor is not None
            # the error is withheld: the client never sees an error that was recovered
            # collapse the older rounds first, then (if that did nothing) compact it all, once each
            drained = compacted = None
            try:
                if too_long and not state.has_attempted_collapse_drain:
                    drained = await collapse_drain(state.messages, state.model, q.deps.compactor,
                                                   config.pipeline.keep_rounds)
                if drained is None and too_long and not state.has_attempted_reactive_compact:
                    compacted = await _compact(q, state, "reactive")
            except anyio.get_cancelled_exc_class():
                for ev in _cancelled(q, state, TerminalReason.ABORTED_STREAMING, end):
                    yield ev
                return
            if drained is not None:
                yield drained[1]
                state = rebuilt(state, ContinueReason.COLLAPSE_DRAIN_RETRY,
                                messages=drained[0], has_attempted_collapse_drain=True,
                                context_base=(0, 0))
                continue
            if compacted is not None:
                yield compacted[1]
                state = rebuilt(state, ContinueReason.REACTIVE_COMPACT_RETRY,
                                messages=compacted[0], has_attempted_reactive_compact=True,
                                has_attempted_collapse_drain=True, context_base=(0, 0))
                continue
            events, messages = endings.close_failed(state.messages, response.blocks, batch)
            reason = (TerminalReason.PROMPT_TOO_LONG if info.code == "promptTooLong"
                      else TerminalReason.MODEL_ERROR)
            for ev in events + end(reason, messages, error=info):
                yield ev
            return

        reported = response.usage.input_tokens + response.usage.output_tokens
        state = replace(state, context_base=(len(state.messages), reported))
        yield UsageReport(state.usage, context_tokens(state), limits.window, config.token_budget)

        if response.stop_reason == "max_tokens":
            for ev in batch.discard("cut off by the output limit"):
                yield ev
            if (state.max_output_tokens_override is None
                    and config.escalated_max_tokens > config.max_tokens):
                yield Tombstone(state.calls - 1, "the output limit was raised and the answer "
                                "is being written again")
                state = rebuilt(state, ContinueReason.MAX_OUTPUT_TOKENS_ESCALATE,
                                max_output_tokens_override=config.escalated_max_tokens)
                continue
            kept = endings.assistant_text_only(response.blocks)
            messages = state.messages + ((kept,) if kept else ())
            if state.max_output_tokens_recovery_count < MAX_OUTPUT_TOKENS_RECOVERY_LIMIT:
                if kept:
                    yield MessageFinal(kept)
                yield MessageFinal(user_text(OUTPUT_LIMIT_NUDGE))
                state = rebuilt(state, ContinueReason.MAX_OUTPUT_TOKENS_RECOVERY,
                                messages=append_user(messages, (TextBlock(OUTPUT_LIMIT_NUDGE),)),
                                max_output_tokens_recovery_count=state.max_output_tokens_recovery_count + 1)
                continue
            if kept:
                yield MessageFinal(kept)
            for ev in end(TerminalReason.COMPLETED, messages, text_of(kept) if kept else "",
                          ErrorInfo("maxOutputTokens", "the answer was cut off by the output "
                                    "token limit, even after asking the model to continue")):
                yield ev
            return

        assistant = endings.assistant_message(response.blocks)
        yield MessageFinal(assistant)
        messages = state.messages + (assistant,)

        if not batch.blocks:
            if q.deps.stop_hooks is not None and not state.stop_hook_active:
                try:
                    hooks = await q.deps.stop_hooks({
                        "source": config.source, "stop_hook_active": state.stop_hook_active,
                        "last_assistant_message": text_of(assistant)})
                except anyio.get_cancelled_exc_class():
                    state = replace(state, messages=messages)
                    for ev in _cancelled(q, state, TerminalReason.ABORTED_TOOLS, end):
                        yield ev
                    return
                if hooks.prevent is not None:
                    for ev in end(TerminalReason.STOP_HOOK_PREVENTED, messages, text_of(assistant),
                                  ErrorInfo("stopHookPrevented", hooks.prevent)):
                        yield ev
                    return
                if hooks.blocking:
                    note = "Stop hook feedback:\n" + "\n".join(f"- {b}" for b in hooks.blocking)
                    yield MessageFinal(user_text(note))
                    state = rebuilt(state, ContinueReason.STOP_HOOK_BLOCKING,
                                    messages=append_user(messages, (TextBlock(note),)),
                                    stop_hook_active=True, turn_count=state.turn_count + 1)
                    continue
            decision = check_token_budget(state.budget, config.token_budget,
                                          state.usage.output_tokens, config.is_subagent)
            if decision.proceed:
                yield MessageFinal(user_text(decision.nudge))
                state = rebuilt(state, ContinueReason.TOKEN_BUDGET_CONTINUATION,
                                messages=append_user(messages, (TextBlock(decision.nudge),)),
                                budget=decision.tracker, turn_count=state.turn_count + 1)
                continue
            for ev in end(TerminalReason.COMPLETED, messages, text_of(assistant)):
                yield ev
            return

        batch.finish_intake()
        try:
            await batch.wait()
        except anyio.get_cancelled_exc_class():
            events, messages, text = endings.aborted_tools(messages, batch, q.run.abort_reason())
            for ev in events + end(TerminalReason.ABORTED_TOOLS, messages, text):
                yield ev
            return
        results = batch.results(endings.CANCELLED_RESULT)
        if config.summary_model:
            calls = list(batch.blocks)
            q.background.spawn(lambda: summarize_tools(q.deps.model, config.summary_model, calls,
                                                       results, q.run.emit))
        queued = q.run.take_queued() if q.run.take_queued is not None else ()
        user = Message("user", results + queued)
        yield MessageFinal(user)
        if batch.stop_reason:
            for ev in end(TerminalReason.HOOK_STOPPED, messages + (user,), text_of(assistant),
                          ErrorInfo("hookStopped", batch.stop_reason)):
                yield ev
            return
        state = next_turn(state, (assistant, user))


def _cancelled(q: Query, state: LoopState, reason: TerminalReason, end) -> list[CoreEvent]:
    """Cancelled between model calls (compacting, running stop hooks): close and stop."""
    tail = () if q.run.abort_reason() == "interrupt" else (TextBlock(endings.INTERRUPTED),)
    events: list[CoreEvent] = [MessageFinal(Message("user", tail))] if tail else []
    return events + end(reason, append_user(state.messages, tail) if tail else state.messages)


async def _compact(q: Query, state: LoopState, layer: str
                   ) -> tuple[tuple[Message, ...], Compaction] | None:
    try:
        result = await q.deps.compactor(state.messages, state.model, layer)
    except Exception as exc:  # compaction failing means the original error surfaces
        log.warning("%s compaction failed: %s", layer, exc)
        return None
    return result.messages, Compaction(layer, result.tokens_before, result.tokens_after,
                                       result.summary, result.messages)


async def drive(events: AsyncIterator[CoreEvent], on_event: Callable[[CoreEvent], None]) -> Terminal:
    """Consume a query to its end, passing each event on; returns the Terminal."""
    async with aclosing(events) as gen:
        async for ev in gen:
            if isinstance(ev, Terminal):
                return ev
            on_event(ev)
    raise RuntimeError("query() ended without a Terminal")
