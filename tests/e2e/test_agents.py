"""The Task tool: a sub-agent with read-only tools, its events nested under the Task call."""

from __future__ import annotations

from e2e.test_turns import new_session


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
