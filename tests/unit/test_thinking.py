"""What a model call asks for in thinking: the choice, the model's support and the room in
`max_tokens` (`heddle.loop.thinking`), and the settings that make the choice."""

from __future__ import annotations

from pathlib import Path

import pytest

from heddle.core.stream import AdaptiveThinking, BudgetThinking
from heddle.loop.thinking import AUTO_BUDGET, CallThinking, ThinkingChoice, call_thinking
from heddle.model.limits import (ADAPTIVE_ONLY, BOTH, BUDGET_ONLY, NO_THINKING, model_limits)
from heddle.settings import ModelLimitSettings, load_settings, parse_settings

AUTO = ThinkingChoice(None)
OFF = ThinkingChoice(0)


def test_auto_thinks_in_the_form_the_model_takes():
    assert call_thinking(AUTO, ADAPTIVE_ONLY, 8192, 128_000) == CallThinking(
        AdaptiveThinking("summarized"), None, 8192 + AUTO_BUDGET)  # it would hide it
    assert call_thinking(AUTO, BOTH, 8192, 128_000).thinking == AdaptiveThinking()
    assert call_thinking(AUTO, BUDGET_ONLY, 8192, 64_000) == CallThinking(
        BudgetThinking(AUTO_BUDGET), None, 8192 + AUTO_BUDGET)


def test_auto_does_not_think_where_the_model_does_not_or_is_unknown():
    assert call_thinking(AUTO, NO_THINKING, 8192, 8192) == CallThinking(None, None, 8192)
    assert call_thinking(AUTO, None, 8192, 32_000) == CallThinking(None, None, 8192)


def test_off_never_thinks():
    for support in (ADAPTIVE_ONLY, BOTH, BUDGET_ONLY, None):
        assert call_thinking(OFF, support, 8192, 64_000) == CallThinking(None, None, 8192)


def test_a_chosen_budget_is_a_budget_where_the_model_takes_one_else_adaptive_room():
    chosen = ThinkingChoice(4096)
    assert call_thinking(chosen, BUDGET_ONLY, 8192, 64_000).thinking == BudgetThinking(4096)
    assert call_thinking(chosen, BOTH, 8192, 64_000).thinking == BudgetThinking(4096)
    assert call_thinking(chosen, None, 8192, 32_000).thinking == BudgetThinking(4096)
    assert call_thinking(chosen, ADAPTIVE_ONLY, 8192, 128_000) == CallThinking(
        AdaptiveThinking("summarized"), None, 8192 + 4096)
    assert call_thinking(chosen, NO_THINKING, 8192, 8192).thinking is None


def test_the_budget_stays_below_max_tokens_within_the_model_limit():
    # a budget larger than the limit allows: the answer keeps its tokens, the budget shrinks
    found = call_thinking(ThinkingChoice(40_000), BUDGET_ONLY, 8192, 32_000)
    assert found == CallThinking(BudgetThinking(32_000 - 8192), None, 32_000)
    # after an escalation the answer alone is the model's limit: half of it is left to think
    found = call_thinking(AUTO, BUDGET_ONLY, 32_000, 32_000)
    assert found == CallThinking(BudgetThinking(AUTO_BUDGET), None, 32_000)
    found = call_thinking(ThinkingChoice(30_000), BUDGET_ONLY, 32_000, 32_000)
    assert found == CallThinking(BudgetThinking(16_000), None, 32_000)
    # an output limit too small to think in: no thinking at all
    assert call_thinking(AUTO, BUDGET_ONLY, 1500, 1500) == CallThinking(None, None, 1500)


@pytest.mark.parametrize("asked, support, sent", [
    ("xhigh", ADAPTIVE_ONLY, "xhigh"), ("xhigh", BOTH, "high"), ("max", BOTH, "max"),
    ("low", BUDGET_ONLY, None), ("medium", None, "medium"), (None, ADAPTIVE_ONLY, None)])
def test_effort_is_the_highest_level_the_model_takes_up_to_the_one_asked(asked, support, sent):
    found = call_thinking(ThinkingChoice(None, asked), support, 8192, 64_000)
    assert found.effort == sent


def test_the_table_knows_how_each_family_thinks():
    assert model_limits("claude-opus-4-7").thinking == ADAPTIVE_ONLY
    assert model_limits("claude-opus-4-6").thinking == BOTH
    assert model_limits("claude-sonnet-4-5-20250929").thinking == BUDGET_ONLY
    assert model_limits("claude-3-5-haiku-20241022").thinking == NO_THINKING
    assert model_limits("someone-elses-model").thinking is None
    # the settings describe a model the table does not know, or correct it
    models = {"local-": ModelLimitSettings(thinking="none"),
              "claude-opus-4-7": ModelLimitSettings(thinking="both")}
    assert model_limits("local-7b", models).thinking == NO_THINKING
    assert model_limits("claude-opus-4-7-x", models).thinking.budget


def test_the_thinking_and_effort_settings(tmp_path: Path):
    warnings: list[str] = []
    read = parse_settings(b'thinking = "off"\neffort = "low"\n', tmp_path / "s.toml", warnings)
    assert (read.thinking, read.effort, warnings) == ("off", "low", [])
    read = parse_settings(b'thinking = 20000\n', tmp_path / "s.toml", warnings)
    assert read.thinking == 20000
    read = parse_settings(b'thinking = 512\neffort = "huge"\n', tmp_path / "s.toml", warnings)
    assert (read.thinking, read.effort) == (None, None)
    assert "thinking: Expected `int` >= 1024" in warnings[0]
    assert "effort: Invalid enum value 'huge'" in warnings[1]
    # the project's choice over the user's, and it applies before the project is trusted
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
    (tmp_path / "config" / "heddle").mkdir(parents=True)
    (tmp_path / "config" / "heddle" / "settings.toml").write_text('thinking = 4096\n'
                                                                 'effort = "high"\n')
    ws = tmp_path / "ws"
    (ws / ".heddle").mkdir(parents=True)
    (ws / ".heddle" / "settings.toml").write_text('thinking = "off"\n')
    merged = load_settings(ws, env).settings
    assert (merged.thinking, merged.effort) == ("off", "high")
