"""Thinking through the daemon: on by default for the models that think, in the form each
takes (the scripted model refuses the wrong one, as the API does), with room for it in
`max_tokens`; the settings' `thinking` and `effort`, and the session's options over them; the
thinking of a tool loop handed back; the summary of a compaction thinking as the session does."""

from __future__ import annotations

import pytest

from e2e.test_turns import new_session

ADAPTIVE, BOTH, BUDGET, NONE = ("claude-opus-4-7", "claude-opus-4-6",
                                "claude-sonnet-4-5-20250929", "claude-3-5-haiku-20241022")
READ = {"content": [{"type": "thinking", "thinking": "Read app.py first.", "signature": "s1"},
                    {"type": "tool_use", "name": "Read", "input": {"path": "app.py"}}]}
DONE = {"content": [{"type": "thinking", "thinking": "It greets.", "signature": "s2"},
                    {"type": "text", "text": "It greets the world."}]}
PLAIN = {"content": [{"type": "text", "text": "It greets the world."}]}
SUMMARIZED = {"type": "adaptive", "display": "summarized"}


def settings(tmp_path, text: str) -> None:
    path = tmp_path / "config" / "heddle" / "settings.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


async def turn(client, sid: str, prompt: str = "what does app.py do?") -> dict:
    return await client.call("turn/start", {"sessionId": sid, "prompt": prompt}, timeout=40)


def sent(scripted, name: str) -> list[tuple]:
    """(thinking, output_config, max_tokens) of each request to `name`."""
    return [(r.body.get("thinking"), r.body.get("output_config"), r.body["max_tokens"])
            for r in scripted.requests_for(name)]


@pytest.mark.parametrize("model, thinking, max_tokens", [
    # Opus 4.7 would send its thinking empty: it is asked for it summarised
    (ADAPTIVE, {"type": "adaptive", "display": "summarized"}, 8192 + 16_000),
    (BOTH, {"type": "adaptive"}, 8192 + 16_000),
    (BUDGET, {"type": "enabled", "budget_tokens": 16_000}, 8192 + 16_000),
])
async def test_a_thinking_model_thinks_by_default_and_gets_its_thinking_back(
        client, scripted, workspace, model, thinking, max_tokens):
    scripted.add_scenario(model, {"apiModel": model, "steps": [READ, DONE]})
    sid = await new_session(client, workspace, model, permissionMode="bypassPermissions")
    result = await turn(client, sid)
    assert result["reason"] == "completed" and result["text"] == "It greets the world."
    requests = scripted.requests_for(model)
    assert [r.status for r in requests] == [200, 200]  # neither refused: the form it takes
    assert sent(scripted, model) == [(thinking, None, max_tokens)] * 2
    # the tool loop hands its signed thinking back, first in the reply that called the tool
    assert requests[1].body["messages"][1]["content"][0] == {
        "type": "thinking", "thinking": "Read app.py first.", "signature": "s1"}
    assert "".join(e["text"] for e in client.turn_events("thinkingDelta")) == (
        "Read app.py first.It greets.")


@pytest.mark.parametrize("model", [NONE, "some-local-model"])
async def test_a_model_that_does_not_think_or_is_unknown_gets_no_thinking(
        client, scripted, workspace, model):
    scripted.add_scenario(model, {"steps": [PLAIN], **({"apiModel": model} if model == NONE
                                                       else {})})
    sid = await new_session(client, workspace, model)
    assert (await turn(client, sid))["reason"] == "completed"
    assert sent(scripted, model) == [(None, None, 8192)]


async def test_the_settings_choose_a_budget_and_an_effort(client, scripted, workspace,
                                                          tmp_path):
    settings(tmp_path, 'thinking = 4096\neffort = "xhigh"\n')
    for model in (ADAPTIVE, BOTH, BUDGET):
        scripted.add_scenario(model, {"apiModel": model, "steps": [PLAIN]})
        sid = await new_session(client, workspace, model)
        assert (await turn(client, sid))["reason"] == "completed"
    # adaptive only: the budget is the room left for it; both: a budget, as chosen; the
    # effort where the model takes it, the highest level it takes up to the one chosen
    assert sent(scripted, ADAPTIVE) == [(SUMMARIZED, {"effort": "xhigh"}, 8192 + 4096)]
    assert sent(scripted, BOTH) == [({"type": "enabled", "budget_tokens": 4096},
                                     {"effort": "high"}, 8192 + 4096)]
    assert sent(scripted, BUDGET) == [({"type": "enabled", "budget_tokens": 4096}, None,
                                       8192 + 4096)]


async def test_the_sessions_options_win_over_the_settings(client, scripted, workspace,
                                                          tmp_path):
    settings(tmp_path, 'thinking = 4096\neffort = "xhigh"\n')
    scripted.add_scenario(ADAPTIVE, {"apiModel": ADAPTIVE, "repeat": True, "steps": [PLAIN]})
    off = await new_session(client, workspace, ADAPTIVE, thinkingBudget=0, effort="low")
    await turn(client, off)
    auto_room = await new_session(client, workspace, ADAPTIVE, thinkingBudget=30_000)
    await turn(client, auto_room)
    assert sent(scripted, ADAPTIVE) == [(None, {"effort": "low"}, 8192),
                                        (SUMMARIZED, {"effort": "xhigh"}, 8192 + 30_000)]
    with pytest.raises(Exception) as refused:
        await new_session(client, workspace, ADAPTIVE, thinkingBudget=500)
    assert getattr(refused.value, "code", None) == -32602
    assert "a thinking budget is 0 (thinking off) or at least 1024 tokens, not 500" in str(
        refused.value)
    with pytest.raises(Exception) as refused:
        await new_session(client, workspace, ADAPTIVE, effort="extreme")
    assert getattr(refused.value, "code", None) == -32602


async def test_the_settings_can_switch_thinking_off(client, scripted, workspace, tmp_path):
    settings(tmp_path, 'thinking = "off"\n')
    scripted.add_scenario(BUDGET, {"apiModel": BUDGET, "steps": [PLAIN]})
    sid = await new_session(client, workspace, BUDGET)
    await turn(client, sid)
    assert sent(scripted, BUDGET) == [(None, None, 8192)]


async def test_an_escalation_keeps_the_thinking_within_the_models_limit(client, scripted,
                                                                        workspace):
    cut = {"content": [{"type": "thinking", "thinking": "Long.", "signature": "s"},
                       {"type": "text", "text": "partial answer"}], "stopReason": "max_tokens"}
    model = "claude-opus-4-1-20250805"  # 32,000 tokens of output at most
    scripted.add_scenario(model, {"apiModel": "claude-opus-4-1", "steps": [cut, PLAIN]})
    sid = await new_session(client, workspace, model)
    result = await turn(client, sid)
    assert result["transitions"] == ["max_output_tokens_escalate"]
    assert [r.status for r in scripted.requests_for(model)] == [200, 200]
    assert sent(scripted, model) == [
        ({"type": "enabled", "budget_tokens": 16_000}, None, 8192 + 16_000),
        ({"type": "enabled", "budget_tokens": 16_000}, None, 32_000)]


async def test_a_compaction_summary_thinks_as_the_session_does(client, scripted, workspace):
    summary = {"content": [{"type": "thinking", "thinking": "Sum up.", "signature": "s3"},
                           {"type": "text", "text": "Goal: explain app.py."}]}
    scripted.add_scenario(BUDGET, {"apiModel": BUDGET, "steps": [READ, DONE, summary]})
    sid = await new_session(client, workspace, BUDGET, permissionMode="bypassPermissions")
    await turn(client, sid)
    compacted = await client.call("session/compact", {"sessionId": sid}, timeout=40)
    assert compacted["summary"] == "Goal: explain app.py."
    session_calls, summarising = sent(scripted, BUDGET)[:2], sent(scripted, BUDGET)[2]
    assert summarising == session_calls[0]  # the same thinking: the cached prefix still holds


async def test_a_sub_agent_thinks_as_its_session_does(client, scripted, workspace):
    task = {"content": [{"type": "thinking", "thinking": "Delegate.", "signature": "s1"},
                        {"type": "tool_use", "name": "Task", "input": {
                            "description": "look", "prompt": "Say what app.py does."}}]}
    report = {"content": [{"type": "thinking", "thinking": "Easy.", "signature": "s2"},
                          {"type": "text", "text": "It greets."}]}
    scripted.add_scenario(ADAPTIVE, {"apiModel": ADAPTIVE, "steps": [task, report, DONE]})
    sid = await new_session(client, workspace, ADAPTIVE, permissionMode="bypassPermissions")
    assert (await turn(client, sid))["reason"] == "completed"
    requests = scripted.requests_for(ADAPTIVE)
    assert [r.status for r in requests] == [200] * 3
    assert "sub-agent" in requests[1].body["system"][0]["text"]
    assert sent(scripted, ADAPTIVE) == [(SUMMARIZED, None, 8192 + 16_000)] * 3
