"""The steps of one iteration, in order: guards → prepare the context → (call the model:
`heddle.loop.model_call`) → recover → output limit → answer → finish or continue → run the
tools (and, when the repeat guard refused a call, ask whether the turn may go on).

Each is an async generator that yields core events and last an outcome (`Onward`, `Again`,
`Stop`). A cancel that lands in a step's await is caught there and closes the conversation,
so the next request is valid; the step then stops the query.
"""

from __future__ import annotations

import logging
from contextlib import aclosing
from dataclasses import replace
from typing import AsyncIterator

import anyio

from heddle.context.pipeline import collapse_drain, prepare
from heddle.core.events import (Compaction, CoreEvent, ErrorInfo, LoopDetected, MessageFinal,
                                TerminalReason, Tombstone, UsageReport)
from heddle.core.messages import Message, TextBlock, append_user, text_of, user_text
from heddle.loop import endings, state as transitions
from heddle.loop.budget import check_token_budget
from heddle.loop.ladder import (OUTPUT_LIMIT_GIVEN_UP, OUTPUT_LIMIT_NUDGE, blocked, context_tokens,
                                guard, output_limit_rung, too_long_rungs)
from heddle.loop.deps import ToolBatch
from heddle.loop.outcomes import Again, Onward, Outcome, Query, Stop
from heddle.loop.repeats import GO_ON, describe, reset
from heddle.loop.state import LoopState
from heddle.loop.summaries import summarize_tools
from heddle.permissions.policy import PermissionPrompt

log = logging.getLogger(__name__)

Step = AsyncIterator[CoreEvent | Outcome]


async def guards(q: Query, now: Onward) -> Step:
    """The model-call cap and the task budget."""
    stopped = guard(q.config, now.state)
    if stopped is None:
        yield now
    else:
        yield Stop(now.state, stopped[0], now.state.messages, error=stopped[1])


async def prepare_context(q: Query, now: Onward) -> Step:
    """The context pipeline (snip, microcompact, collapse, auto-compact), then the blocking
    limit."""
    state = now.state
    compactor = q.deps.compactor if q.config.source != "compact" else None
    try:
        messages, size, compactions = await prepare(
            state.messages, context_tokens(state), q.limits, state.model, compactor,
            q.config.pipeline, q.deps.microcompactor,
            cold=q.config.cache_cold and state.calls == 0)
    except anyio.get_cancelled_exc_class():
        for item in _cancelled(q, state, TerminalReason.ABORTED_STREAMING):
            yield item
        return
    for ev in compactions:
        yield ev
    if compactions:
        state = replace(state, messages=messages, context_base=(len(messages), size))
    error = blocked(q.config, q.limits, size)
    yield Onward(state) if error is None else Stop(state, TerminalReason.BLOCKING_LIMIT,
                                                   state.messages, error=error)


async def recover(q: Query, now: Onward) -> Step:
    """A call that was cancelled or failed: close the conversation, or, for a prompt that was
    too long, collapse or compact it and go again."""
    state, call = now.state, now.call
    response = call.response
    if call.status == "aborted":
        events, messages, text = endings.aborted(state.messages, response.with_partial(),
                                                 call.batch, q.run.abort_reason())
        for ev in events:
            yield ev
        yield Stop(state, TerminalReason.ABORTED_STREAMING, messages, text)
        return
    if call.status == "failed":
        # the error is withheld: the client never sees an error that was recovered
        for rung in too_long_rungs(state, call.error, q.deps.compactor is not None):
            try:
                found = await _shrink(q, state, rung)
            except anyio.get_cancelled_exc_class():
                for item in _cancelled(q, state, TerminalReason.ABORTED_STREAMING):
                    yield item
                return
            if found is not None:
                yield found[1]
                retry = (transitions.collapse_retry if rung == "collapse"
                         else transitions.compact_retry)
                yield Again(retry(state, found[0]))
                return
        events, messages = endings.close_failed(state.messages, response.with_partial(),
                                                call.batch)
        for ev in events:
            yield ev
        reason = (TerminalReason.PROMPT_TOO_LONG if call.error.code == "promptTooLong"
                  else TerminalReason.MODEL_ERROR)
        yield Stop(state, reason, messages, error=call.error)
        return
    yield now


async def output_limit(q: Query, now: Onward) -> Step:
    """Report the usage; an answer the output limit cut off is asked again with a higher limit,
    then nudged on, then kept as it is."""
    state, call = now.state, now.call
    response = call.response
    reported = response.usage.prompt_tokens + response.usage.output_tokens
    state = replace(state, context_base=(len(state.messages), reported))
    yield UsageReport(state.usage, context_tokens(state), q.limits.window, q.config.token_budget)
    if response.stop_reason != "max_tokens":
        yield Onward(state, call)
        return
    for ev in call.batch.discard("cut off by the output limit", running=True, finished=True):
        yield ev
    cap = q.output_cap(state.model)
    rung = output_limit_rung(q.config, state, cap)
    if rung == "escalate":
        yield Tombstone(state.calls - 1, "the output limit was raised and the answer is being "
                        "written again")
        yield Again(transitions.escalate(state, cap))
        return
    kept = endings.assistant_text_only(response.blocks)
    messages = state.messages + ((kept,) if kept else ())
    if kept:
        yield MessageFinal(kept)
    if rung == "nudge":
        yield MessageFinal(user_text(OUTPUT_LIMIT_NUDGE))
        yield Again(transitions.nudge_on(
            state, append_user(messages, (TextBlock(OUTPUT_LIMIT_NUDGE),))))
    else:
        yield Stop(state, TerminalReason.COMPLETED, messages, text_of(kept) if kept else "",
                   OUTPUT_LIMIT_GIVEN_UP)


async def answer(q: Query, now: Onward) -> Step:
    """The response joins the conversation (before any stop hook or tool runs, so the
    transcript has it first)."""
    assistant = endings.assistant_message(now.call.response.blocks)
    yield MessageFinal(assistant)
    yield Onward(replace(now.state, messages=now.state.messages + (assistant,)), now.call)


async def finish(q: Query, now: Onward) -> Step:
    """No tool calls: the stop hooks, then the token budget, may send the model back to work;
    otherwise the query is complete. With tool calls: on to run them."""
    state = now.state
    if now.call.batch.blocks:
        yield now
        return
    text = text_of(state.messages[-1])
    hooks = q.deps.stop_hooks
    if hooks is not None and not state.stop_hook_active:
        try:
            said = await hooks({"source": q.config.source,
                                "stop_hook_active": state.stop_hook_active,
                                "last_assistant_message": text})
        except anyio.get_cancelled_exc_class():
            for item in _cancelled(q, state, TerminalReason.ABORTED_TOOLS):
                yield item
            return
        if said.prevent is not None:
            yield Stop(state, TerminalReason.STOP_HOOK_PREVENTED, state.messages, text,
                       ErrorInfo("stopHookPrevented", said.prevent))
            return
        if said.blocking:
            note = "Stop hook feedback:\n" + "\n".join(f"- {b}" for b in said.blocking)
            yield MessageFinal(user_text(note))
            yield Again(transitions.stop_hook_retry(
                state, append_user(state.messages, (TextBlock(note),))))
            return
    decision = check_token_budget(state.budget, q.config.token_budget, state.usage.output_tokens,
                                  q.config.is_subagent)
    if decision.proceed:
        yield MessageFinal(user_text(decision.nudge))
        yield Again(transitions.budget_retry(
            state, append_user(state.messages, (TextBlock(decision.nudge),)), decision.tracker))
        return
    yield Stop(state, TerminalReason.COMPLETED, state.messages, text)


async def run_tools(q: Query, now: Onward) -> Step:
    """Wait for the calls (unsafe ones run now, one at a time), then go round with their
    results and any prompt queued meanwhile."""
    state, batch = now.state, now.call.batch
    batch.finish_intake()
    try:
        await batch.wait()
    except anyio.get_cancelled_exc_class():
        events, messages, text = endings.aborted_tools(state.messages, batch,
                                                       q.run.abort_reason())
        for ev in events:
            yield ev
        yield Stop(state, TerminalReason.ABORTED_TOOLS, messages, text)
        return
    results = batch.results(endings.CANCELLED_RESULT)
    if q.config.summary_model:
        calls, model, summary_model = list(batch.blocks), q.deps.model, q.config.summary_model
        q.background.spawn(lambda: summarize_tools(model, summary_model, calls, results,
                                                   q.run.emit))
    queued = q.run.take_queued() if q.run.take_queued is not None else ()
    user = Message("user", results + queued)
    yield MessageFinal(user)
    if batch.stop_reason:
        yield Stop(state, TerminalReason.HOOK_STOPPED, state.messages + (user,),
                   text_of(state.messages[-1]), ErrorInfo("hookStopped", batch.stop_reason))
    elif batch.caught is not None:
        async with aclosing(_caught(q, state, user, batch)) as items:
            async for item in items:
                yield item
    else:
        yield Again(transitions.next_turn(state, (user,), batch.repeats))


async def _caught(q: Query, state: LoopState, user: Message, batch: ToolBatch) -> Step:
    """The repeat guard refused a call: tell the editor, then ask the user whether the turn
    may go on (counting afresh) or ends. Nobody to ask, or bypassPermissions mode: it ends."""
    block, found = batch.caught
    said = describe(found)
    yield LoopDetected(block.id, block.name, found.count, found.tools, said)
    messages, text = state.messages + (user,), text_of(state.messages[-1])
    asker = q.deps.loop_asker
    if asker is None or q.deps.permissions.mode == "bypassPermissions":
        why = "nobody can be asked" if asker is None else "bypassPermissions mode does not ask"
        yield Stop(state, TerminalReason.LOOP_DETECTED, messages, text,
                   ErrorInfo("loopDetected", f"{said}; the turn ends ({why})"))
        return
    try:
        answer = await asker(PermissionPrompt(
            block.id, block.name, block.input, f"Heddle is repeating itself: {said}. Let it go "
            "on?", None, "", loop=True))
    except anyio.get_cancelled_exc_class():
        for item in _cancelled(q, replace(state, messages=messages),
                               TerminalReason.ABORTED_TOOLS):
            yield item
        return
    if answer.decision == "reject":
        because = f": {answer.reason}" if answer.reason else ""
        yield Stop(state, TerminalReason.LOOP_DETECTED, messages, text, ErrorInfo(
            "loopDetected", f"{said}; the turn was stopped{because}"))
        return
    yield MessageFinal(user_text(GO_ON))
    yield Again(transitions.next_turn(
        state, (Message("user", user.content + (TextBlock(GO_ON),)),), reset(batch.repeats)))


def _cancelled(q: Query, state: LoopState, reason: TerminalReason) -> list[CoreEvent | Stop]:
    """Cancelled between model calls (compacting, running stop hooks): close and stop."""
    tail = () if q.run.abort_reason() == "interrupt" else (TextBlock(endings.INTERRUPTED),)
    events: list[CoreEvent | Stop] = [MessageFinal(Message("user", tail))] if tail else []
    return events + [Stop(state, reason,
                          append_user(state.messages, tail) if tail else state.messages)]


async def _shrink(q: Query, state: LoopState, rung: str
                  ) -> tuple[tuple[Message, ...], Compaction] | None:
    """Collapse the older rounds, or compact it all; None when that did nothing or failed (the
    original error surfaces then)."""
    if rung == "collapse":
        return await collapse_drain(state.messages, state.model, q.deps.compactor,
                                    q.config.pipeline.keep_rounds)
    try:
        result = await q.deps.compactor(state.messages, state.model, "reactive")
    except Exception as exc:  # compaction failing means the original error surfaces
        log.warning("reactive compaction failed: %s", exc)
        return None
    return result.messages, Compaction("reactive", result.tokens_before, result.tokens_after,
                                       result.summary, result.messages)

