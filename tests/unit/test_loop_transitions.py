"""The loop's transitions and decisions are pure functions of the state: one per continue
reason, and the guards and ladders that pick them."""

from __future__ import annotations

import dataclasses

from heddle.context.windows import Limits
from heddle.core.events import ErrorInfo, TerminalReason, Usage
from heddle.core.messages import Message, TextBlock, user_text
from heddle.loop import state as t
from heddle.loop.budget import BudgetTracker
from heddle.loop.ladder import blocked, guard, max_tokens, output_limit_rung, too_long_rungs
from heddle.loop.params import LoopConfig
from heddle.loop.state import ContinueReason, LoopState, Transition

BUSY = LoopState(messages=(user_text("a"),), turn_count=3, max_output_tokens_recovery_count=1,
                 max_output_tokens_override=64000, stop_hook_active=False, model="m",
                 budget=BudgetTracker(1, 10, 10), context_base=(1, 500),
                 usage=Usage(input_tokens=7, output_tokens=3), calls=5)
NEW = (user_text("a"), Message("assistant", (TextBlock("b"),)))
CONFIG = LoopConfig(system="s", model="m")


def changed(before: LoopState, after: LoopState) -> dict:
    """The fields a transition changed, old and new."""
    return {f.name: (getattr(before, f.name), getattr(after, f.name))
            for f in dataclasses.fields(LoopState)
            if getattr(before, f.name) != getattr(after, f.name)}


def test_each_transition_names_its_reason_and_changes_only_its_fields():
    assert changed(BUSY, t.collapse_retry(BUSY, NEW)) == {
        "messages": (BUSY.messages, NEW), "has_attempted_collapse_drain": (False, True),
        "context_base": ((1, 500), (0, 0)),
        "transition": (None, Transition(ContinueReason.COLLAPSE_DRAIN_RETRY))}
    assert changed(BUSY, t.compact_retry(BUSY, NEW)) == {
        "messages": (BUSY.messages, NEW), "has_attempted_reactive_compact": (False, True),
        "has_attempted_collapse_drain": (False, True), "context_base": ((1, 500), (0, 0)),
        "transition": (None, Transition(ContinueReason.REACTIVE_COMPACT_RETRY))}
    assert changed(BUSY, t.escalate(BUSY, 99)) == {
        "max_output_tokens_override": (64000, 99),
        "transition": (None, Transition(ContinueReason.MAX_OUTPUT_TOKENS_ESCALATE))}
    assert changed(BUSY, t.nudge_on(BUSY, NEW)) == {
        "messages": (BUSY.messages, NEW), "max_output_tokens_recovery_count": (1, 2),
        "transition": (None, Transition(ContinueReason.MAX_OUTPUT_TOKENS_RECOVERY))}
    assert changed(BUSY, t.stop_hook_retry(BUSY, NEW)) == {
        "messages": (BUSY.messages, NEW), "stop_hook_active": (False, True),
        "turn_count": (3, 4), "transition": (None, Transition(ContinueReason.STOP_HOOK_BLOCKING))}
    tracker = BudgetTracker(2, 20, 30)
    assert changed(BUSY, t.budget_retry(BUSY, NEW, tracker)) == {
        "messages": (BUSY.messages, NEW), "budget": (BUSY.budget, tracker), "turn_count": (3, 4),
        "transition": (None, Transition(ContinueReason.TOKEN_BUDGET_CONTINUATION))}
    assert changed(BUSY, t.next_turn(BUSY, NEW[1:])) == {
        "messages": (BUSY.messages, NEW), "turn_count": (3, 4),
        "max_output_tokens_recovery_count": (1, 0), "max_output_tokens_override": (64000, None),
        "transition": (None, Transition(ContinueReason.NEXT_TURN))}


def test_the_guards_stop_at_the_cap_and_the_spent_task_budget():
    assert guard(CONFIG, BUSY) is None
    reason, error = guard(dataclasses.replace(CONFIG, max_turns=3), BUSY)
    assert (reason, error.code) == (TerminalReason.MAX_TURNS, "maxTurns")
    assert guard(dataclasses.replace(CONFIG, task_budget=11), BUSY) is None
    reason, error = guard(dataclasses.replace(CONFIG, task_budget=10), BUSY)
    assert (reason, error.message) == (TerminalReason.TOKEN_BUDGET, "the task budget of 10 "
                                       "tokens is spent (10 used)")


def test_the_blocking_limit_spares_compaction_itself():
    limits = Limits(window=200_000, max_output=32_000)
    assert blocked(CONFIG, limits, limits.blocking_at) is None
    assert blocked(CONFIG, limits, limits.blocking_at + 1).code == "blockingLimit"
    assert blocked(dataclasses.replace(CONFIG, source="compact"), limits, 10**9) is None


def test_the_prompt_too_long_ladder_climbs_each_rung_once():
    too_long, other = ErrorInfo("promptTooLong", "x"), ErrorInfo("serverError", "x")
    assert too_long_rungs(BUSY, too_long, can_compact=True) == ("collapse", "compact")
    assert too_long_rungs(t.collapse_retry(BUSY, NEW), too_long, True) == ("compact",)
    assert too_long_rungs(t.compact_retry(BUSY, NEW), too_long, True) == ()
    assert too_long_rungs(BUSY, too_long, can_compact=False) == ()
    assert too_long_rungs(BUSY, other, can_compact=True) == ()


def test_the_output_limit_ladder_escalates_once_then_nudges_three_times():
    fresh = LoopState(messages=NEW)
    assert output_limit_rung(CONFIG, fresh, 32_000) == "escalate"
    assert output_limit_rung(dataclasses.replace(CONFIG, max_tokens=64_000), fresh,
                             64_000) == "nudge"
    raised = t.escalate(fresh, 32_000)
    assert max_tokens(CONFIG, raised, 32_000) == 32_000
    rungs = []
    for _ in range(4):
        rungs.append(output_limit_rung(CONFIG, raised, 32_000))
        raised = t.nudge_on(raised, NEW)
    assert rungs == ["nudge", "nudge", "nudge", "give_up"]


def test_max_tokens_never_exceeds_the_models_maximum():
    fresh = LoopState(messages=NEW)
    assert max_tokens(CONFIG, fresh, 64_000) == 8192
    assert max_tokens(CONFIG, fresh, 4096) == 4096  # a model below the configured default
    assert output_limit_rung(CONFIG, fresh, 4096) == "nudge"  # no room to escalate into
    # after a switch to a model with a lower maximum, the raised limit is lowered too
    assert max_tokens(CONFIG, t.escalate(fresh, 64_000), 8192) == 8192
