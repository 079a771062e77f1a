"""Token budget: keep working while under 90% of a budget the user asked for (`+500k`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

COMPLETION_THRESHOLD = 0.9
DIMINISHING_DELTA = 500
DIMINISHING_AFTER = 3

_BUDGET = re.compile(r"(?:^|\s)\+(\d+(?:\.\d+)?)\s*([km])\b", re.IGNORECASE)


def parse_budget(prompt: str) -> int | None:
    """`+500k` or `+1.5m` anywhere in the prompt, as a token count."""
    match = _BUDGET.search(prompt)
    if not match:
        return None
    scale = 1_000 if match.group(2).lower() == "k" else 1_000_000
    return int(float(match.group(1)) * scale)


@dataclass(frozen=True)
class BudgetTracker:
    continuations: int = 0
    last_delta: int = 0
    last_total: int = 0


@dataclass(frozen=True)
class BudgetDecision:
    proceed: bool
    tracker: BudgetTracker
    nudge: str = ""
    diminishing: bool = False


def check_token_budget(tracker: BudgetTracker, budget: int | None, turn_tokens: int,
                       is_subagent: bool) -> BudgetDecision:
    """Continue or stop, from the output tokens the turn has produced so far."""
    if is_subagent or not budget or budget <= 0:
        return BudgetDecision(False, tracker)
    delta = turn_tokens - tracker.last_total
    diminishing = (tracker.continuations >= DIMINISHING_AFTER and delta < DIMINISHING_DELTA
                   and tracker.last_delta < DIMINISHING_DELTA)
    if not diminishing and turn_tokens < budget * COMPLETION_THRESHOLD:
        pct = round(100 * turn_tokens / budget)
        nudge = (f"You have used {turn_tokens:,} of the {budget:,}-token budget for this task "
                 f"({pct}%), so {budget - turn_tokens:,} tokens remain. Keep working on the task; "
                 "do not summarise or stop yet.")
        return BudgetDecision(True, BudgetTracker(tracker.continuations + 1, delta, turn_tokens),
                              nudge)
    return BudgetDecision(False, tracker, diminishing=diminishing)
