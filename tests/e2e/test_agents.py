"""The Task tool: a sub-agent with read-only tools, its events nested under the Task call."""

from __future__ import annotations

import asyncio
import time

from e2e.test_turns import new_session
from heddle.tools.agent import AGENT_MAX_TURNS
from e2e.test_repeats import guard_off


async def test_task_runs_a_sub_agent_and_returns_its_report(client, scripted, workspace):
    scripted.add_scenario("m", {"steps": [
        {"content": [{"type": "text", "text": "I'll delegate the search."},
                     {"type": "tool_use", "name": "Task", "input": {
                         "description": "find greet", "prompt": "Find where greet is defined"}}]},
        {"match": {"lastUserContains": "Find where greet is defined"},
         "content": [{"type": "tool_use", "name": "Grep", "input": {"pattern": "def greet"}}]},
        {"match": {"lastUserContains": "app.py:1:def greet"},
         "content": [{"type": "text", "text": "greet is defined in app.py line 1."}]},
        {"match": {"lastUserContains": "greet is defined in app.py line 1."},
         "content": [{"type": "text", "text": "It is in app.py."}]},
    ]})
    sid = await new_session(client, workspace, "m")
    result = await client.call("turn/start", {"sessionId": sid, "prompt": "where is greet?"})
    assert result["reason"] == "completed" and result["text"] == "It is in app.py."

    task_call = client.turn_events("toolCallInput")[0]
    assert task_call["tool"] == "Task" and task_call["title"] == "Task: find greet"
    nested = client.turn_events("agent")
    assert {n["toolCallId"] for n in nested} == {task_call["toolCallId"]}
    assert {n["agent"] for n in nested} == {"find greet"}
    assert [n["event"]["kind"] for n in nested] == ["toolCallStarted", "toolCallInput",
                                                    "toolCallFinished"]
    assert nested[1]["event"]["tool"] == "Grep"
    assert client.turn_events("textDelta")[-1]["text"] != "greet is defined in app.py line 1."

    requests = scripted.requests_for("m")
    sub_tools = sorted(t["name"] for t in requests[1].body["tools"])
    assert sub_tools == ["Glob", "Grep", "LS", "Read"]
    assert "Task" in {t["name"] for t in requests[0].body["tools"]}
    task_result = requests[3].body["messages"][-1]["content"][0]
    assert task_result["content"] == "greet is defined in app.py line 1."
    assert client.turn_events("toolCallFinished")[-1]["summary"].startswith("1 tool call, ")


TASK = {"content": [{"type": "tool_use", "name": "Task", "input": {
    "description": "survey", "prompt": "Survey the workspace"}}]}


def task_result(scripted, request: int) -> dict:
    """The Task call's tool_result in the parent's request number `request`."""
    (result,) = scripted.requests_for("m")[request].body["messages"][-1]["content"][:1]
    assert result["type"] == "tool_result"
    return result


async def test_a_sub_agent_whose_model_fails_gives_an_error_result(client, scripted, workspace):
    scripted.add_scenario("m", {"steps": [
        TASK,
        {"fault": {"status": 400, "message": "the sub-agent's request was refused"}},
        {"match": {"lastUserContains": "the sub-agent's request was refused"},
         "content": [{"type": "text", "text": "The survey failed."}]}]})
    sid = await new_session(client, workspace, "m")
    result = await client.call("turn/start", {"sessionId": sid, "prompt": "survey it"})
    assert result["reason"] == "completed" and result["text"] == "The survey failed."
    failed = task_result(scripted, 2)
    assert failed["is_error"] is True
    assert failed["content"] == ("The sub-agent stopped before answering: its model call failed "
                                 "(the sub-agent's request was refused).")
    (finished,) = client.turn_events("toolCallFinished")
    assert (finished["tool"], finished["status"]) == ("Task", "error")
    nested = [n["event"]["kind"] for n in client.turn_events("agent")]
    assert nested == ["error"]


async def test_a_sub_agent_that_never_stops_is_stopped_at_its_turn_cap(client, scripted,
                                                                       workspace, daemon_env):
    guard_off(daemon_env)  # the same LS again and again: the cap, not the repeat guard, ends it
    ls = {"content": [{"type": "tool_use", "name": "LS", "input": {}}]}
    final = {"match": {"lastUserContains": "sub-agent stopped"},
             "content": [{"type": "text", "text": "The survey went on too long."}]}
    # the sub-agent lists the folder at every call it gets; past its cap it would take the
    # parent's next step as its answer
    scripted.add_scenario("m", {"steps": [TASK] + [ls] * AGENT_MAX_TURNS + [final]})
    sid = await new_session(client, workspace, "m")
    result = await client.call("turn/start", {"sessionId": sid, "prompt": "survey it"},
                               timeout=50)
    assert result["reason"] == "completed" and result["text"] == "The survey went on too long."
    assert len(scripted.requests_for("m")) == 1 + AGENT_MAX_TURNS + 1
    stopped = task_result(scripted, AGENT_MAX_TURNS + 1)
    assert stopped["is_error"] is True
    assert stopped["content"] == ("The sub-agent stopped before answering: it reached its limit "
                                  f"of {AGENT_MAX_TURNS} model calls.")
    nested = client.turn_events("agent")
    assert sum(n["event"]["kind"] == "toolCallFinished" for n in nested) == AGENT_MAX_TURNS


async def test_a_cancelled_sub_agent_gives_an_error_result(client, scripted, workspace):
    slow = {"content": [{"type": "text", "text": "word " * 400}], "chunk": 5, "delayMs": 10}
    scripted.add_scenario("m", {"steps": [
        TASK, slow, {"content": [{"type": "text", "text": "Continuing."}]}]})
    sid = await new_session(client, workspace, "m")
    turn = asyncio.ensure_future(client.call("turn/start", {"sessionId": sid, "prompt": "go"}))
    deadline = time.monotonic() + 30
    while len(scripted.requests_for("m")) < 2:  # the sub-agent's model call is streaming
        assert time.monotonic() < deadline, "the sub-agent never called the model"
        await asyncio.sleep(0.01)
    client.protocol.notify("turn/cancel", {"sessionId": sid})
    result = await asyncio.wait_for(turn, 10)
    assert (result["reason"], result["cancelPhase"]) == ("cancelled", "tools")
    follow = await client.call("turn/start", {"sessionId": sid, "prompt": "what happened?"})
    assert follow["reason"] == "completed"
    # whichever ends first, the sub-agent or the parent closing its calls, the result says so
    cancelled = task_result(scripted, 2)
    assert cancelled["is_error"] is True
    assert cancelled["content"] in (
        "The sub-agent stopped before answering: the user cancelled the turn.",
        "The user cancelled the turn before this tool call finished; its effect is unknown.")
    assert client.turn_events("toolCallFinished")[0]["status"] in ("error", "cancelled")
