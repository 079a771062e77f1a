"""What a model call asks for in thinking and effort, and the `max_tokens` that leaves room for
the thinking: a pure function of the session's choice, the model's support and the call's
answer size.

    choice        adaptive model         budget model                 unknown model
    auto          adaptive               budget AUTO_BUDGET           none
    off           none                   none                         none
    N tokens      adaptive (room N)      budget N                     budget N

A model that takes both forms (the 4.6 models) is an adaptive one, except that a budget the
user chose is sent as a budget. A model the table says does not think gets none, whatever the
choice. A model that would send its thinking empty is asked for it summarised, for the
editors to show. The thinking counts against `max_tokens`, so the call asks for the answer's tokens
plus the thinking's (up to the model's output limit), and a budget always stays below it.
"""

from __future__ import annotations

from dataclasses import dataclass

from heddle.core.stream import (EFFORTS, AdaptiveThinking, BudgetThinking, Thinking,
                                ThinkingSupport)

AUTO_BUDGET = 16_000
"""The thinking budget of `auto` on a model that takes only a budget, and the room left for
adaptive thinking when no budget was chosen."""
MIN_BUDGET = 1024
"""The Messages API's smallest `budget_tokens`."""
OFF = 0


@dataclass(frozen=True)
class ThinkingChoice:
    """The session's thinking: `budget` None for auto, 0 for off, else tokens (≥ 1024)."""

    budget: int | None = OFF
    effort: str | None = None
    """An `output_config.effort` level; None: the model's default."""


@dataclass(frozen=True)
class CallThinking:
    thinking: Thinking | None
    effort: str | None
    max_tokens: int


def call_thinking(choice: ThinkingChoice, support: ThinkingSupport | None, answer: int,
                  cap: int) -> CallThinking:
    """The thinking, effort and `max_tokens` of a call whose answer may take `answer` tokens
    (the escalation ladder's `max_tokens`), to a model whose output limit is `cap`."""
    effort = _effort(choice.effort, support)
    form, room = _form(choice.budget, support)
    if form is None:
        return CallThinking(None, effort, answer)
    max_tokens = min(answer + room, cap)
    if form == "adaptive":
        shown = "summarized" if support is not None and support.hides_thinking else None
        return CallThinking(AdaptiveThinking(shown), effort, max_tokens)
    # the answer keeps at least half of what the call may write, so an answer already at the
    # model's limit (after an escalation) still thinks, with less
    budget = min(room, max_tokens - min(answer, max_tokens // 2))
    if budget < MIN_BUDGET:  # a model whose output limit is too small to think in
        return CallThinking(None, effort, answer)
    return CallThinking(BudgetThinking(budget), effort, max_tokens)


def _form(budget: int | None, support: ThinkingSupport | None) -> tuple[str | None, int]:
    """`adaptive`, `budget` or None, and the tokens of room it needs."""
    if budget == OFF or (support is not None and not (support.adaptive or support.budget)):
        return None, 0
    if budget is None:  # auto
        if support is None:
            return None, 0
        return ("adaptive" if support.adaptive else "budget"), AUTO_BUDGET
    if support is not None and not support.budget:
        return "adaptive", budget
    return "budget", budget


def _effort(effort: str | None, support: ThinkingSupport | None) -> str | None:
    """The level asked for, or the highest the model takes below it; None where the model
    takes none. A model the table does not know gets the level as it was asked for."""
    if effort is None or support is None:
        return effort
    taken = [e for e in support.efforts if EFFORTS.index(e) <= EFFORTS.index(effort)]
    return taken[-1] if taken else None
