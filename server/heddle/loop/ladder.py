"""The loop's decisions, as pure functions of the state: the guards that end a query before a
model call, and which rung of the recovery ladder a failed or cut-off call climbs next.

    prompt too long   collapse the older rounds (once) → compact it all (once) → fail
    output limit      ask again with the model's maximum (once, if that is higher) → nudge it on
                      (3 times) → stop
"""

from __future__ import annotations

from typing import Literal

from heddle.context.windows import Limits, estimate_tokens
from heddle.core.events import ErrorInfo, TerminalReason
from heddle.core.messages import to_api
from heddle.loop.params import LoopConfig
from heddle.loop.state import LoopState
from heddle.words import plural

MAX_OUTPUT_TOKENS_RECOVERY_LIMIT = 3
OUTPUT_LIMIT_NUDGE = ("Output token limit hit. Resume directly where you stopped - no apology, "
                      "no recap. Split the remaining work into smaller pieces.")
OUTPUT_LIMIT_GIVEN_UP = ErrorInfo("maxOutputTokens", "the answer was cut off by the output token "
                                  "limit, even after asking the model to continue")

TooLongRung = Literal["collapse", "compact"]
OutputLimitRung = Literal["escalate", "nudge", "give_up"]


def context_tokens(state: LoopState) -> int:
    """The last response's reported size plus a high estimate of what came after it."""
    counted, tokens = state.context_base
    return tokens + estimate_tokens(to_api(state.messages[counted:]))


def guard(config: LoopConfig, state: LoopState) -> tuple[TerminalReason, ErrorInfo] | None:
    """Why the query must stop before its next model call: the model-call cap, or the task
    budget spent; None: it may go on."""
    if state.turn_count >= config.max_turns:
        return TerminalReason.MAX_TURNS, ErrorInfo(
            "maxTurns", f"stopped after {plural(config.max_turns, 'model call')}")
    spent = state.usage.prompt_tokens + state.usage.output_tokens
    if config.task_budget and spent >= config.task_budget:
        return TerminalReason.TOKEN_BUDGET, ErrorInfo(
            "tokenBudget", f"the task budget of {config.task_budget:,} tokens is spent "
            f"({spent:,} used)")
    return None


def blocked(config: LoopConfig, limits: Limits, size: int) -> ErrorInfo | None:
    """The conversation, after the context pipeline, is too big to send; compaction's own
    query is never blocked (it is what would make room)."""
    if config.source == "compact" or size <= limits.blocking_at:
        return None
    return ErrorInfo("blockingLimit", f"the conversation (about {size:,} tokens) is too close to "
                     f"the context window of {limits.window:,}; compact it or start a new "
                     "session")


def too_long_rungs(state: LoopState, error: ErrorInfo,
                   can_compact: bool) -> tuple[TooLongRung, ...]:
    """What to try, in order, after a failed call: nothing unless the prompt was too long and
    there is a compactor; each rung once per query."""
    if error.code != "promptTooLong" or not can_compact:
        return ()
    rungs: tuple[TooLongRung, ...] = ()
    if not state.has_attempted_collapse_drain:
        rungs += ("collapse",)
    if not state.has_attempted_reactive_compact:
        rungs += ("compact",)
    return rungs


def max_tokens(config: LoopConfig, state: LoopState, cap: int) -> int:
    """The `max_tokens` of the next call: the configured one, or the raised one after an
    escalation, and never above `cap`, the model's maximum output."""
    return min(state.max_output_tokens_override or config.max_tokens, cap)


def output_limit_rung(config: LoopConfig, state: LoopState, cap: int) -> OutputLimitRung:
    """After an answer cut off by the output limit; `cap` is the model's maximum output."""
    if state.max_output_tokens_override is None and cap > max_tokens(config, state, cap):
        return "escalate"
    if state.max_output_tokens_recovery_count < MAX_OUTPUT_TOKENS_RECOVERY_LIMIT:
        return "nudge"
    return "give_up"
