"""Model faults seen through the daemon: retries are visible, failures end the turn cleanly."""

from __future__ import annotations

from e2e.test_turns import new_session

HELLO = {"content": [{"type": "text", "text": "Recovered."}]}


async def test_overload_is_retried_and_visible(client, scripted, workspace):
    scripted.add_scenario("s", {"steps": [{"fault": {"status": 529, "retryAfter": 0.05, "times": 2}}, HELLO]})
    sid = await new_session(client, workspace, "s")
    result = await client.call("turn/start", {"sessionId": sid, "prompt": "hi"})
    assert result["reason"] == "completed" and result["text"] == "Recovered."
    retries = client.turn_events("retry")
    assert [(r["attempt"], r["error"]["code"], r["delayMs"]) for r in retries] == [
        (1, "overloaded", 50), (2, "overloaded", 50)]
    assert result["usage"]["modelCalls"] == 3


async def test_prompt_too_long_ends_turn_with_reason(client, scripted, workspace):
    scripted.add_scenario("s", {"steps": [{"fault": {"status": 400, "promptTooLong": True}}, HELLO]})
    sid = await new_session(client, workspace, "s")
    result = await client.call("turn/start", {"sessionId": sid, "prompt": "hi"})
    assert result["reason"] == "promptTooLong"
    assert "prompt is too long" in result["error"]["message"]
    assert client.turn_events("error")[0]["error"]["code"] == "promptTooLong"


async def test_stream_failure_after_tool_use_leaves_a_valid_session(client, scripted, workspace):
    scripted.add_scenario("s", {"steps": [
        {"content": [{"type": "tool_use", "name": "Read", "input": {"path": "app.py"}},
                     {"type": "text", "text": "and now a long explanation " * 5}],
         "chunk": 4, "fault": {"errorEvent": "api_error", "afterEvents": 12}},
        HELLO]})
    sid = await new_session(client, workspace, "s")
    failed = await client.call("turn/start", {"sessionId": sid, "prompt": "hi"})
    assert failed["reason"] == "modelError" and failed["error"]["code"] == "serverError"
    again = await client.call("turn/start", {"sessionId": sid, "prompt": "try again"})
    assert again["reason"] == "completed"
    messages = scripted.requests_for("s")[1].body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"][0]["type"] == "tool_use"
    result = messages[2]["content"][0]
    assert result["type"] == "tool_result" and result["is_error"] is True
    assert messages[2]["content"][-1] == {"type": "text", "text": "try again"}


async def test_invalid_tool_input_becomes_an_error_result(client, scripted, workspace):
    scripted.add_scenario("s", {"steps": [
        {"content": [{"type": "tool_use", "name": "Read", "input": {"path": 42}},
                     {"type": "tool_use", "name": "Nope", "input": {}},
                     {"type": "tool_use", "name": "Read", "input": {"path": "../../etc/passwd"}}]},
        HELLO]})
    sid = await new_session(client, workspace, "s")
    result = await client.call("turn/start", {"sessionId": sid, "prompt": "hi"})
    assert result["reason"] == "completed"
    results = scripted.requests_for("s")[1].body["messages"][-1]["content"]
    assert [r["is_error"] for r in results] == [True, True, True]
    assert "Expected `str`, got `int` - at `$.path`" in results[0]["content"]
    assert "There is no tool named Nope" in results[1]["content"]
    assert "outside the workspace" in results[2]["content"]


async def test_max_turns_ends_the_turn(client, scripted, workspace):
    read = {"content": [{"type": "tool_use", "name": "Read", "input": {"path": "app.py"}}]}
    scripted.add_scenario("s", {"steps": [read], "repeat": True})
    sid = await new_session(client, workspace, "s")
    result = await client.call("turn/start", {"sessionId": sid, "prompt": "loop", "maxTurns": 3})
    assert result["reason"] == "maxTurns"
    assert len(scripted.requests_for("s")) == 3
