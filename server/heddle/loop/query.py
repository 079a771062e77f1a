"""`query()`: the agent loop as an async generator of core events, ending with a `Terminal`.

One iteration: guards (max turns, task budget, blocking limit) → one model call, streaming
(safe tools start as their blocks complete; an overloaded primary model falls back once) →
recovery if the call failed or was cut off → stop hooks and the token budget if the model is
done → otherwise run the tools and go round. Every `continue` builds a complete new LoopState
whose `transition` says why. Cancellation from the caller's cancel scope is caught where it
lands, and the conversation is closed so the next request is valid: every tool_use gets a
tool_result, synthetic if need be.
"""

from __future__ import annotations

import logging
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from typing import AsyncIterator, Callable

import anyio
import anyio.abc

from heddle.context.pipeline import PipelineSettings, collapse_drain, prepare
from heddle.context.windows import Limits, estimate_tokens, limits_for
from heddle.core.events import (Compaction, CoreEvent, ErrorInfo, ErrorReport, MessageFinal,
                                Terminal, TerminalReason, Usage, UsageReport)
from heddle.core.messages import (Block, Message, TextBlock, append_user, text_of, to_api,
                                  user_text)
from heddle.core.tools import Tool, ToolContext
from heddle.loop import endings
from heddle.loop.budget import check_token_budget
from heddle.loop.deps import LoopDeps, Outlet
from heddle.loop.model_call import CallOutcome, call_model
from heddle.loop.state import ContinueReason, LoopState, Transition, next_turn
from heddle.loop.summaries import Background, summarize_tools
from heddle.permissions.policy import Asker, PermissionPolicy
from heddle.tools.base import schema_of

log = logging.getLogger(__name__)

ESCALATED_MAX_TOKENS = 64_000
MAX_OUTPUT_TOKENS_RECOVERY_LIMIT = 3
OUTPUT_LIMIT_NUDGE = ("Output token limit hit. Resume directly where you stopped - no apology, "
                      "no recap. Split the remaining work into smaller pieces.")


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
    """`editor`, `agent:<name>` for sub-agents, `compact` for compaction."""
    max_turns: int = 100
    max_tokens: int = 8192
    permission_lock: anyio.Lock = field(default_factory=anyio.Lock)
    fallback_model: str | None = None
    token_budget: int | None = None
    """Keep working until this many output tokens (a `+500k` request); None: off."""
    task_budget: int | None = None
    """Hard cap on input+output tokens of the whole query; None: off."""
    thinking_budget: int | None = None
    summary_model: str | None = None
    """Cheap model that labels each tool batch in the background; None: off."""
    limits: Limits | None = None
    escalated_max_tokens: int = ESCALATED_MAX_TOKENS
    take_queued: Callable[[], tuple[Block, ...]] | None = None
    """Prompts queued while the turn runs; they join at the next iteration boundary."""
    abort_reason: Callable[[], str | None] = lambda: None
    """After a cancel: "interrupt" when a new prompt replaced the turn (no interruption note)."""
    pipeline: PipelineSettings = PipelineSettings()
    outlet: Outlet | None = None
    """Where the events go, if it can ask the turn to pause while its reader is behind."""


@dataclass(frozen=True)
class LoopConfig:
    """Snapshot taken once at entry; never re-read during the query."""

    source: str
    max_turns: int
    max_tokens: int
    escalated_max_tokens: int
    fallback_model: str | None
    token_budget: int | None
    task_budget: int | None
    thinking_budget: int | None
    summary_model: str | None
    limits: Limits
    tool_schemas: tuple[dict, ...]

    @property
    def is_subagent(self) -> bool:
        return self.source.startswith("agent:")


def snapshot(p: QueryParams) -> LoopConfig:
    return LoopConfig(
        source=p.source, max_turns=p.max_turns, max_tokens=p.max_tokens,
        escalated_max_tokens=p.escalated_max_tokens, fallback_model=p.fallback_model,
        token_budget=p.token_budget, task_budget=p.task_budget, thinking_budget=p.thinking_budget,
        summary_model=p.summary_model, limits=p.limits or limits_for(p.model),
        tool_schemas=tuple(schema_of(t) for t in p.tools.values()))


def context_tokens(state: LoopState) -> int:
    """The last response's reported size plus a high estimate of what came after it."""
    counted, tokens = state.context_base
    return tokens + estimate_tokens(to_api(state.messages[counted:]))


def rebuilt(state: LoopState, reason: ContinueReason, **changes) -> LoopState:
    """A complete new state for a `continue` point: every field named, changes applied."""
    fields = dict(
        messages=state.messages, turn_count=state.turn_count,
        max_output_tokens_recovery_count=state.max_output_tokens_recovery_count,
        max_output_tokens_override=state.max_output_tokens_override,
        has_attempted_reactive_compact=state.has_attempted_reactive_compact,
        has_attempted_collapse_drain=state.has_attempted_collapse_drain,
        stop_hook_active=state.stop_hook_active, model=state.model, budget=state.budget,
        context_base=state.context_base)
    fields.update(changes)
    return LoopState(transition=Transition(reason), **fields)


async def query(p: QueryParams) -> AsyncIterator[CoreEvent]:
    background = Background(p.task_group)
    try:
        async with aclosing(_loop(p, snapshot(p), background)) as loop:
            async for ev in loop:
                yield ev
    finally:
        background.close()


async def _loop(p: QueryParams, config: LoopConfig, background: Background
                ) -> AsyncIterator[CoreEvent]:
    state = LoopState(messages=p.messages, model=p.model)
    usage = Usage()
    transitions: list[str] = []
    index = 0

    def end(reason: TerminalReason, messages: tuple[Message, ...], text: str = "",
            error: ErrorInfo | None = None) -> list[CoreEvent]:
        return ([ErrorReport(error)] if error else []) + [
            Terminal(reason, messages, usage, text, error, tuple(transitions))]

    while True:
        if state.transition is not None:
            transitions.append(state.transition.reason.value)
        if state.turn_count >= config.max_turns:
            for ev in end(TerminalReason.MAX_TURNS, state.messages, error=ErrorInfo(
                    "maxTurns", f"stopped after {config.max_turns} model calls")):
                yield ev
            return
        spent = usage.input_tokens + usage.output_tokens
        if config.task_budget and spent >= config.task_budget:
            for ev in end(TerminalReason.TOKEN_BUDGET, state.messages, error=ErrorInfo(
                    "tokenBudget", f"the task budget of {config.task_budget:,} tokens is spent "
                    f"({spent:,} used)")):
                yield ev
            return
        size = context_tokens(state)
        try:
            messages, size, compactions = await prepare(
                state.messages, size, config.limits, state.model,
                p.deps.compactor if config.source != "compact" else None, p.pipeline,
                p.deps.microcompactor)
        except anyio.get_cancelled_exc_class():
            for ev in _cancelled(p, state, TerminalReason.ABORTED_STREAMING, end):
                yield ev
            return
        for ev in compactions:
            yield ev
        if compactions:
            state = replace(state, messages=messages, context_base=(len(messages), size))
        if config.source != "compact" and size > config.limits.blocking_at:
            for ev in end(TerminalReason.BLOCKING_LIMIT, state.messages, error=ErrorInfo(
                    "blockingLimit", f"the conversation (about {size:,} tokens) is too close to "
                    f"the context window of {config.limits.window:,}; compact it or start a new "
                    "session")):
                yield ev
            return

        outcome: CallOutcome | None = None
        async with aclosing(call_model(p, config, state, index)) as call:
            async for ev in call:
                if isinstance(ev, CallOutcome):
                    outcome = ev
                else:
                    yield ev
        assert outcome is not None
        index = outcome.next_index
        if outcome.model != state.model:  # the fallback model takes over for the rest of the turn
            state = replace(state, model=outcome.model, messages=outcome.messages)
        response, executor = outcome.response, outcome.executor
        usage = usage + response.usage

        if outcome.status == "aborted":
            events, messages, text = endings.aborted(state.messages, response.with_partial(),
                                                     executor, p.abort_reason())
            for ev in events + end(TerminalReason.ABORTED_STREAMING, messages, text):
                yield ev
            return
        if outcome.status == "failed":
            info = outcome.error
            too_long = info.code == "promptTooLong" and p.deps.compactor is not None
            # the error is withheld: the client never sees an error that was recovered
            # collapse the older rounds first, then (if that did nothing) compact it all, once each
            drained = compacted = None
            try:
                if too_long and not state.has_attempted_collapse_drain:
                    drained = await collapse_drain(state.messages, state.model, p.deps.compactor,
                                                   p.pipeline.keep_rounds)
                if drained is None and too_long and not state.has_attempted_reactive_compact:
                    compacted = await _compact(p, state, "reactive")
            except anyio.get_cancelled_exc_class():
                for ev in _cancelled(p, state, TerminalReason.ABORTED_STREAMING, end):
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
            events, messages = endings.close_failed(state.messages, response.blocks, executor)
            reason = (TerminalReason.PROMPT_TOO_LONG if info.code == "promptTooLong"
                      else TerminalReason.MODEL_ERROR)
            for ev in events + end(reason, messages, error=info):
                yield ev
            return

        reported = response.usage.input_tokens + response.usage.output_tokens
        state = replace(state, context_base=(len(state.messages), reported))
        yield UsageReport(usage, context_tokens(state), config.limits.window, config.token_budget)

        if response.stop_reason == "max_tokens":
            for ev in endings.discard(executor, "cut off by the output limit"):
                yield ev
            if (state.max_output_tokens_override is None
                    and config.escalated_max_tokens > config.max_tokens):
                yield endings.tombstone(index - 1, "the output limit was raised and the answer "
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

        if not executor.calls:
            if p.deps.stop_hooks is not None and not state.stop_hook_active:
                try:
                    hooks = await p.deps.stop_hooks({
                        "source": config.source, "stop_hook_active": state.stop_hook_active,
                        "last_assistant_message": text_of(assistant)})
                except anyio.get_cancelled_exc_class():
                    state = replace(state, messages=messages)
                    for ev in _cancelled(p, state, TerminalReason.ABORTED_TOOLS, end):
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
            decision = check_token_budget(state.budget, config.token_budget, usage.output_tokens,
                                          config.is_subagent)
            if decision.proceed:
                yield MessageFinal(user_text(decision.nudge))
                state = rebuilt(state, ContinueReason.TOKEN_BUDGET_CONTINUATION,
                                messages=append_user(messages, (TextBlock(decision.nudge),)),
                                budget=decision.tracker, turn_count=state.turn_count + 1)
                continue
            for ev in end(TerminalReason.COMPLETED, messages, text_of(assistant)):
                yield ev
            return

        executor.finish_intake()
        try:
            await executor.wait()
        except anyio.get_cancelled_exc_class():
            events, messages, text = endings.aborted_tools(messages, executor, p.abort_reason())
            for ev in events + end(TerminalReason.ABORTED_TOOLS, messages, text):
                yield ev
            return
        results = executor.results(endings.CANCELLED_RESULT)
        if config.summary_model:
            calls = [c.block for c in executor.calls]
            background.spawn(lambda: summarize_tools(p.deps.model, config.summary_model, calls,
                                                     results, p.tool_context.emit))
        queued = p.take_queued() if p.take_queued is not None else ()
        user = Message("user", results + queued)
        yield MessageFinal(user)
        stop = getattr(executor, "stop_reason", None)
        if stop:
            for ev in end(TerminalReason.HOOK_STOPPED, messages + (user,), text_of(assistant),
                          ErrorInfo("hookStopped", stop)):
                yield ev
            return
        state = next_turn(state, (assistant, user))


def _cancelled(p: QueryParams, state: LoopState, reason: TerminalReason, end) -> list[CoreEvent]:
    """Cancelled between model calls (compacting, running stop hooks): close and stop."""
    tail = () if p.abort_reason() == "interrupt" else (TextBlock(endings.INTERRUPTED),)
    events: list[CoreEvent] = [MessageFinal(Message("user", tail))] if tail else []
    return events + end(reason, append_user(state.messages, tail) if tail else state.messages)


async def _compact(p: QueryParams, state: LoopState, layer: str
                   ) -> tuple[tuple[Message, ...], Compaction] | None:
    try:
        result = await p.deps.compactor(state.messages, state.model, layer)
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
