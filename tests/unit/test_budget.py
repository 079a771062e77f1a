"""Token budget decisions and the `+500k` syntax."""

from heddle.loop.budget import BudgetTracker, check_token_budget, parse_budget


def test_parse_budget():
    assert parse_budget("refactor the parser +500k") == 500_000
    assert parse_budget("+1.5m go") == 1_500_000
    assert parse_budget("use x+500k as a name") is None
    assert parse_budget("no budget") is None


def test_continue_under_ninety_percent_with_a_nudge():
    d = check_token_budget(BudgetTracker(), 10_000, 4_000, is_subagent=False)
    assert d.proceed and d.tracker == BudgetTracker(1, 4_000, 4_000)
    assert "4,000 of the 10,000-token budget for this task (40%)" in d.nudge and "6,000 tokens remain" in d.nudge
    assert not check_token_budget(BudgetTracker(), 10_000, 9_000, is_subagent=False).proceed


def test_diminishing_returns_after_three_continuations():
    t = BudgetTracker(continuations=3, last_delta=100, last_total=1_000)
    d = check_token_budget(t, 1_000_000, 1_200, is_subagent=False)
    assert not d.proceed and d.diminishing
    t = BudgetTracker(continuations=2, last_delta=100, last_total=1_000)
    assert check_token_budget(t, 1_000_000, 1_200, is_subagent=False).proceed


def test_subagents_and_no_budget_never_continue():
    assert not check_token_budget(BudgetTracker(), 10_000, 10, is_subagent=True).proceed
    assert not check_token_budget(BudgetTracker(), None, 10, is_subagent=False).proceed
