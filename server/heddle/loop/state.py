"""Loop state: one frozen value per iteration, rebuilt whole at every `continue` point.

The transitions are pure functions from one state to the next, one per continue reason; the
steps (`heddle.loop.steps`) pick which one applies and with what messages.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from heddle.core.events import Usage
from heddle.core.messages import Message
from heddle.loop.budget import BudgetTracker
from heddle.loop.repeats import Repeats


class ContinueReason(enum.Enum):
    """Why the loop went round again. Seven reasons, as in the loop design."""

    NEXT_TURN = "next_turn"
    MAX_OUTPUT_TOKENS_ESCALATE = "max_output_tokens_escalate"
    MAX_OUTPUT_TOKENS_RECOVERY = "max_output_tokens_recovery"
    REACTIVE_COMPACT_RETRY = "reactive_compact_retry"
    COLLAPSE_DRAIN_RETRY = "collapse_drain_retry"
    STOP_HOOK_BLOCKING = "stop_hook_blocking"
    TOKEN_BUDGET_CONTINUATION = "token_budget_continuation"


@dataclass(frozen=True)
class Transition:
    reason: ContinueReason
    detail: str = ""


@dataclass(frozen=True)
class LoopState:
    messages: tuple[Message, ...]
    turn_count: int = 0
    """Model calls that completed in this query (the next call is number turn_count + 1)."""
    transition: Transition | None = None
    """Why the loop continued into this state; None for the first iteration."""
    max_output_tokens_recovery_count: int = 0
    max_output_tokens_override: int | None = None
    has_attempted_reactive_compact: bool = False
    """One reactive compaction per turn: never reset, not even by stop-hook retries."""
    has_attempted_collapse_drain: bool = False
    """Collapsing older rounds is tried once per turn before a full reactive compaction."""
    stop_hook_active: bool = False
    """Stop hooks sent the model back to work once; they do not run again this turn."""
    model: str = ""
    """The model calls go to; changes once if the fallback model takes over."""
    budget: BudgetTracker = BudgetTracker()
    context_base: tuple[int, int] = (0, 0)
    """(messages counted, tokens): the last response's reported input+output size."""
    usage: Usage = Usage()
    """What the query's model calls have used so far."""
    calls: int = 0
    """Model calls started so far, replaced ones included: the next call's output index."""
    repeats: Repeats = Repeats()
    """The repeat guard's limits and the recent calls it counts (`heddle.loop.repeats`)."""


def rebuilt(state: LoopState, reason: ContinueReason, **changes) -> LoopState:
    """A complete new state for a `continue` point: every field named, changes applied."""
    fields = dict(
        messages=state.messages, turn_count=state.turn_count,
        max_output_tokens_recovery_count=state.max_output_tokens_recovery_count,
        max_output_tokens_override=state.max_output_tokens_override,
        has_attempted_reactive_compact=state.has_attempted_reactive_compact,
        has_attempted_collapse_drain=state.has_attempted_collapse_drain,
        stop_hook_active=state.stop_hook_active, model=state.model, budget=state.budget,
        context_base=state.context_base, usage=state.usage, calls=state.calls,
        repeats=state.repeats)
    fields.update(changes)
    return LoopState(transition=Transition(reason), **fields)


def next_turn(state: LoopState, new_messages: tuple[Message, ...],
              repeats: Repeats | None = None) -> LoopState:
    """After tool results: go round with the grown conversation. Output-limit recovery starts
    over; the reactive-compact guard and the stop-hook flag are kept; `repeats`: the repeat
    guard's count after the calls (None: unchanged)."""
    return LoopState(
        messages=state.messages + new_messages,
        turn_count=state.turn_count + 1,
        transition=Transition(ContinueReason.NEXT_TURN),
        max_output_tokens_recovery_count=0,
        max_output_tokens_override=None,
        has_attempted_reactive_compact=state.has_attempted_reactive_compact,
        has_attempted_collapse_drain=state.has_attempted_collapse_drain,
        stop_hook_active=state.stop_hook_active,
        model=state.model,
        budget=state.budget,
        context_base=state.context_base,
        usage=state.usage,
        calls=state.calls,
        repeats=state.repeats if repeats is None else repeats,
    )


def collapse_retry(state: LoopState, messages: tuple[Message, ...]) -> LoopState:
    """The prompt was too long and its older rounds were collapsed: send it again (once)."""
    return rebuilt(state, ContinueReason.COLLAPSE_DRAIN_RETRY, messages=messages,
                   has_attempted_collapse_drain=True, context_base=(0, 0))


def compact_retry(state: LoopState, messages: tuple[Message, ...]) -> LoopState:
    """The prompt was too long and all of it was compacted: send it again (once; a collapse
    is not tried after it)."""
    return rebuilt(state, ContinueReason.REACTIVE_COMPACT_RETRY, messages=messages,
                   has_attempted_reactive_compact=True, has_attempted_collapse_drain=True,
                   context_base=(0, 0))


def escalate(state: LoopState, max_tokens: int) -> LoopState:
    """The answer was cut off by the output limit: ask the same again with a higher one."""
    return rebuilt(state, ContinueReason.MAX_OUTPUT_TOKENS_ESCALATE,
                   max_output_tokens_override=max_tokens)


def nudge_on(state: LoopState, messages: tuple[Message, ...]) -> LoopState:
    """The answer was cut off again: keep its text and ask the model to continue."""
    return rebuilt(state, ContinueReason.MAX_OUTPUT_TOKENS_RECOVERY, messages=messages,
                   max_output_tokens_recovery_count=state.max_output_tokens_recovery_count + 1)


def stop_hook_retry(state: LoopState, messages: tuple[Message, ...]) -> LoopState:
    """A stop hook sent the model back to work (its hooks do not run again this turn)."""
    return rebuilt(state, ContinueReason.STOP_HOOK_BLOCKING, messages=messages,
                   stop_hook_active=True, turn_count=state.turn_count + 1)


def budget_retry(state: LoopState, messages: tuple[Message, ...],
                 tracker: BudgetTracker) -> LoopState:
    """The token budget is not spent yet: keep working."""
    return rebuilt(state, ContinueReason.TOKEN_BUDGET_CONTINUATION, messages=messages,
                   budget=tracker, turn_count=state.turn_count + 1)
