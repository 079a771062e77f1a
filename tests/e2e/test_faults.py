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
    assert [(r["attempt"], r["maxAttempts"], r["error"]["code"], r["delayMs"])
            for r in retries] == [(2, 5, "overloaded", 50), (3, 5, "overloaded", 50)]
    assert result["usage"]["modelCalls"] == 3


async def test_prompt_too_long_is_compacted_once_then_surfaced(client, scripted, workspace):
    too_long = {"fault": {"status": 400, "promptTooLong": True}}
    summary = {"content": [{"type": "text", "text": "Goal: say hi."}]}
    scripted.add_scenario("s", {"steps": [too_long, summary, too_long, HELLO]})
    sid = await new_session(client, workspace, "s")
    result = await client.call("turn/start", {"sessionId": sid, "prompt": "hi"})
    assert result["reason"] == "promptTooLong"
    assert "prompt is too long" in result["error"]["message"]
    assert result["transitions"] == ["reactive_compact_retry"]
    assert len(scripted.requests_for("s")) == 3  # one compaction, never a second
    kinds = [e["kind"] for e in client.turn_events()]
    assert kinds.count("error") == 1 and kinds.index("compaction") < kinds.index("error")


async def test_prompt_too_long_recovered_by_compaction_shows_no_error(client, scripted, workspace):
    too_long = {"fault": {"status": 413}}
    summary = {"content": [{"type": "text", "text": "Goal: greet the user."}]}
    scripted.add_scenario("s", {"steps": [too_long, summary, HELLO]})
    sid = await new_session(client, workspace, "s")
    result = await client.call("turn/start", {"sessionId": sid, "prompt": "please say hi"})
    assert result["reason"] == "completed" and result["text"] == "Recovered."
    assert client.turn_events("error") == []  # withheld, then recovered
    (compaction,) = client.turn_events("compaction")
    assert compaction["layer"] == "reactive" and compaction["summary"] == "Goal: greet the user."
    compact_request = scripted.requests_for("s")[1].body
    assert "Summarise the conversation" in compact_request["messages"][-1]["content"][-1]["text"]
    # the session's own tools and system prompt (offered, never run), for the prompt cache
    first = scripted.requests_for("s")[0].body
    assert (compact_request["tools"], compact_request["system"]) == (first["tools"],
                                                                     first["system"])
    retried = scripted.requests_for("s")[2].body["messages"]
    assert len(retried) == 1
    texts = [b["text"] for b in retried[0]["content"]]
    assert "Goal: greet the user." in texts[0] and texts[-1] == "please say hi"


async def test_a_tool_called_while_compacting_is_refused_and_the_summary_still_written(
        client, scripted, workspace):
    """The summary call offers the session's tools (for the prompt cache) and asks for none; a
    model that calls one anyway gets an error result and a second call, not a failed compaction."""
    too_long = {"fault": {"status": 413}}
    stray = {"content": [{"type": "tool_use", "name": "Read", "input": {"path": "app.py"}}]}
    summary = {"content": [{"type": "text", "text": "Goal: greet the user."}]}
    scripted.add_scenario("s", {"steps": [too_long, stray, summary, HELLO]})
    sid = await new_session(client, workspace, "s")
    result = await client.call("turn/start", {"sessionId": sid, "prompt": "please say hi"})
    assert result["reason"] == "completed" and result["text"] == "Recovered."
    (compaction,) = client.turn_events("compaction")
    assert compaction["summary"] == "Goal: greet the user."
    second = scripted.requests_for("s")[2].body["messages"][-1]["content"]
    assert second[0]["type"] == "tool_result" and second[0]["is_error"] is True
    assert client.turn_events("toolCallStarted") == []  # the summary's calls are not the turn's


async def test_stream_failure_after_tool_use_leaves_a_valid_session(client, scripted, workspace):
    scripted.add_scenario("s", {"steps": [
        {"content": [{"type": "tool_use", "name": "Read", "input": {"path": "app.py"}},
                     {"type": "text", "text": "and now a long explanation " * 5}],
         "chunk": 4, "fault": {"errorEvent": "invalid_request_error", "afterEvents": 12}},
        HELLO]})
    sid = await new_session(client, workspace, "s")
    failed = await client.call("turn/start", {"sessionId": sid, "prompt": "hi"})
    assert failed["reason"] == "modelError" and failed["error"]["code"] == "invalidRequest"
    assert len(scripted.requests_for("s")) == 1  # not a failure that is retried
    again = await client.call("turn/start", {"sessionId": sid, "prompt": "try again"})
    assert again["reason"] == "completed"
    messages = scripted.requests_for("s")[1].body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"][0]["type"] == "tool_use"
    result = messages[2]["content"][0]
    (finished,) = client.turn_events("toolCallFinished")
    assert result["type"] == "tool_result" and result["tool_use_id"] == finished["toolCallId"]
    # the Read may have finished before the response failed, or been stopped: either way the
    # model is told what the editor was
    assert result["is_error"] is (finished["status"] != "ok")
    if finished["status"] != "ok":
        assert finished["summary"] == "discarded: the model's response failed"
        assert result["content"] == ("This tool call's result was discarded: the model's "
                                     "response failed.")
    assert {k: v for k, v in messages[2]["content"][-1].items() if k != "cache_control"} == {
        "type": "text", "text": "try again"}


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
