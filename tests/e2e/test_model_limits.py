"""Per-model limits through the daemon: no request asks for more output than the model allows
(the scripted model refuses one that does, as the API does), and the settings describe a model
the table does not know."""

from __future__ import annotations

from e2e.test_turns import new_session

CUT = {"content": [{"type": "text", "text": "partial answer"}], "stopReason": "max_tokens"}


async def turn(client, sid):
    return await client.call("turn/start", {"sessionId": sid, "prompt": "go"}, timeout=40)


async def test_escalation_on_a_32k_model_asks_for_exactly_32000(client, scripted, workspace):
    scripted.add_scenario("claude-opus-4-1-20250805",
                          {"apiModel": "claude-opus-4-1", "steps": [CUT], "repeat": True})
    # thinking off: the answer alone (test_thinking.py escalates with thinking on)
    sid = await new_session(client, workspace, "claude-opus-4-1-20250805", thinkingBudget=0)
    result = await turn(client, sid)
    requests = scripted.requests_for("claude-opus-4-1-20250805")
    assert [r.body["max_tokens"] for r in requests] == [8192, 32000, 32000, 32000, 32000]
    assert [r.status for r in requests] == [200] * 5  # none refused as above the limit
    assert result["transitions"] == (["max_output_tokens_escalate"]
                                     + ["max_output_tokens_recovery"] * 3)
    assert result["reason"] == "completed" and result["error"]["code"] == "maxOutputTokens"


async def test_a_model_without_room_to_escalate_ends_the_turn_honestly(client, scripted,
                                                                      workspace):
    # Haiku 3 allows 4,096 output tokens: less than the daemon's default of 8,192
    scripted.add_scenario("claude-3-haiku-20240307",
                          {"apiModel": "claude-3-haiku-20240307", "steps": [CUT],
                           "repeat": True})
    sid = await new_session(client, workspace, "claude-3-haiku-20240307")
    result = await turn(client, sid)
    requests = scripted.requests_for("claude-3-haiku-20240307")
    assert [r.body["max_tokens"] for r in requests] == [4096] * 4
    assert [r.status for r in requests] == [200] * 4
    assert result["transitions"] == ["max_output_tokens_recovery"] * 3  # nothing to raise
    assert client.turn_events("tombstone") == []
    assert result["reason"] == "completed" and result["error"]["code"] == "maxOutputTokens"
    assert result["text"] == "partial answer"


async def test_settings_describe_a_local_model(client, scripted, workspace, tmp_path):
    settings = tmp_path / "config" / "heddle" / "settings.toml"
    settings.parent.mkdir(parents=True)
    settings.write_text('[models."local-"]\ncontext_window = 50000\nmax_output_tokens = 1000\n'
                        '[models."local-big"]\nmax_output_tokens = 20000\n')
    scripted.add_scenario("local-small", {"steps": [CUT, CUT, CUT, CUT]})
    scripted.add_scenario("local-big-1", {"steps": [CUT, {"content": [
        {"type": "text", "text": "all of it"}]}]})
    small = await new_session(client, workspace, "local-small")
    result = await turn(client, small)
    assert [r.body["max_tokens"] for r in scripted.requests_for("local-small")] == [1000] * 4
    assert result["transitions"] == ["max_output_tokens_recovery"] * 3
    assert {u["contextWindow"] for u in client.turn_events("usage")} == {50000}
    big = await new_session(client, workspace, "local-big-1")
    result = await turn(client, big)
    # the longest matching entry wins: its output limit, the shorter entry's window
    assert [r.body["max_tokens"] for r in scripted.requests_for("local-big-1")] == [8192, 20000]
    assert result["transitions"] == ["max_output_tokens_escalate"]
    assert client.turn_events("usage")[-1]["contextWindow"] == 50000


async def test_compaction_asks_no_more_than_the_summary_models_limit(client, scripted,
                                                                     workspace, tmp_path):
    settings = tmp_path / "config" / "heddle" / "settings.toml"
    settings.parent.mkdir(parents=True)
    settings.write_text('[models."local-summ"]\nmax_output_tokens = 2000\n')
    read = {"content": [{"type": "tool_use", "name": "Read", "input": {"path": "app.py"}}]}
    scripted.add_scenario("s", {"steps": [read, read, read, {"content": [
        {"type": "text", "text": "Read it."}]}]})
    scripted.add_scenario("local-summ", {"steps": [
        {"content": [{"type": "text", "text": "Goal: read app.py."}]}]})
    sid = await new_session(client, workspace, "s", compactModel="local-summ")
    await client.call("turn/start", {"sessionId": sid, "prompt": "read app.py thrice"})
    compacted = await client.call("session/compact", {"sessionId": sid})
    assert compacted["summary"] == "Goal: read app.py."
    (summarising,) = scripted.requests_for("local-summ")
    assert summarising.body["max_tokens"] == 2000


async def test_a_prompt_the_window_cannot_take_is_refused_and_not_kept(client, scripted,
                                                                       workspace):
    # Haiku 3: a window of 200,000 tokens and 4,096 of output; the prompt alone is ~230,000
    scripted.add_scenario("claude-3-haiku-20240307",
                          {"apiModel": "claude-3-haiku-20240307",
                           "steps": [{"content": [{"type": "text", "text": "Fine."}]}]})
    sid = await new_session(client, workspace, "claude-3-haiku-20240307")
    try:
        await client.call("turn/start", {"sessionId": sid, "prompt": "word " * 160_000},
                          timeout=40)
    except Exception as exc:
        assert getattr(exc, "code", None) == -32602, exc
        assert "more than the context window of claude-3-haiku-20240307 (200,000)" in str(exc)
    else:
        raise AssertionError("a prompt bigger than the window was taken")
    assert scripted.requests_for("claude-3-haiku-20240307") == []  # nothing was sent
    assert (await turn(client, sid))["reason"] == "completed"  # the session goes on
    (sent,) = scripted.requests_for("claude-3-haiku-20240307")
    (only,) = sent.body["messages"]  # the refused prompt is not in the conversation
    texts = [b["text"] for b in only["content"]]  # the session's briefing, then the prompt
    assert texts[-1] == "go" and not any("word word" in t for t in texts)
    assert texts[0].startswith("<environment>")
