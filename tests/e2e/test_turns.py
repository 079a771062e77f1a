"""End-to-end turns over real stdio: the daemon, the real SDK, the scripted model."""

from __future__ import annotations

import asyncio

from e2e import lsp


def read_grep_edit(old: str = "'Hello, ' + name", new: str = "f'Hello, {name}!'") -> dict:
    return {"steps": [
        {"content": [{"type": "text", "text": "Let me look at the code."},
                     {"type": "tool_use", "name": "Read", "input": {"path": "app.py"}},
                     {"type": "tool_use", "name": "Grep", "input": {"pattern": "greet"}}]},
        {"match": {"lastUserContains": "return 'Hello, ' + name"},
         "content": [{"type": "tool_use", "name": "Edit",
                      "input": {"path": "app.py", "old_string": old, "new_string": new}}]},
        {"content": [{"type": "text", "text": "I switched greet to an f-string."}]},
    ]}


async def new_session(client, workspace, model: str, **extra) -> str:
    result = await client.call("session/new", {"workspace": str(workspace), "model": model, **extra})
    return result["sessionId"]


async def test_multi_step_turn_with_permission(client, scripted, workspace):
    scripted.add_scenario("edit", read_grep_edit())
    sid = await new_session(client, workspace, "edit")

    result = await client.call("turn/start", {"sessionId": sid, "prompt": "Use an f-string"})

    assert result["reason"] == "completed"
    assert result["text"] == "I switched greet to an f-string."
    assert result["usage"]["modelCalls"] == 3
    assert "f'Hello, {name}!'" in (workspace / "app.py").read_text()
    kinds = [e["kind"] for e in client.turn_events()]
    assert kinds[0] == "turnStarted"
    assert kinds.count("toolCallFinished") == 3
    assert "permissionAsked" in kinds and "permissionAnswered" in kinds
    assert lsp.seqs_contiguous(client)
    (req,) = client.permission_requests
    assert req["tool"] == "Edit" and req["title"] == "Edit app.py"
    assert req["preview"]["kind"] == "diff"
    assert "+    return f'Hello, {name}!'" in req["preview"]["diff"]
    assert [o["decision"] for o in req["options"]] == ["allowOnce", "allowAlways", "reject"]
    assert req["options"][1]["rule"] == "Edit(app.py)"
    finished = client.turn_events("toolCallFinished")
    assert [f["status"] for f in finished] == ["ok", "ok", "ok"]
    assert finished[2]["diff"].startswith("--- a/app.py")
    # the model saw the Read result (line-numbered) and the Grep result
    second = scripted.requests_for("edit")[1].body["messages"]
    results = [b for b in second[-1]["content"] if b["type"] == "tool_result"]
    assert "     2\t    return 'Hello, ' + name" in results[0]["content"]
    assert "app.py:1:def greet(name):" in results[1]["content"]


async def test_permission_rejected_with_message_reaches_model(client, scripted, workspace):
    scripted.add_scenario("edit", read_grep_edit())
    client.answer = lambda params: {"decision": "reject", "message": "keep string concatenation"}
    sid = await new_session(client, workspace, "edit")

    result = await client.call("turn/start", {"sessionId": sid, "prompt": "Use an f-string"})

    assert result["reason"] == "completed"
    assert "'Hello, ' + name" in (workspace / "app.py").read_text()
    last = scripted.requests_for("edit")[2].body["messages"][-1]["content"][0]
    assert last["is_error"] is True
    assert "keep string concatenation" in last["content"]
    assert client.turn_events("toolCallFinished")[-1]["status"] == "rejected"


async def test_second_turn_continues_the_session(client, scripted, workspace):
    scripted.add_scenario("chat", {"steps": [
        {"content": [{"type": "text", "text": "First answer."}]},
        {"content": [{"type": "text", "text": "Second answer."}]}]})
    sid = await new_session(client, workspace, "chat")

    first = await client.call("turn/start", {"sessionId": sid, "prompt": "one"})
    second = await client.call("turn/start", {"sessionId": sid, "prompt": "two"})

    assert (first["text"], second["text"]) == ("First answer.", "Second answer.")
    assert first["turnId"] != second["turnId"]
    messages = scripted.requests_for("chat")[1].body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"] == [{"type": "text", "text": "First answer."}]


async def test_context_items_reach_the_model(client, scripted, workspace):
    scripted.add_scenario("ctx", {"steps": [{"content": [{"type": "text", "text": "ok"}]}]})
    sid = await new_session(client, workspace, "ctx")
    await client.call("turn/start", {"sessionId": sid, "prompt": "explain", "context": [
        {"path": str(workspace / "app.py"), "text": "def greet(name):",
         "range": {"startLine": 1, "endLine": 1}, "language": "python"}]})
    text = scripted.requests_for("ctx")[0].body["messages"][0]["content"][-1]["text"]
    assert f"{workspace / 'app.py'} (lines 1-1):\n```python\ndef greet(name):\n```" in text
    assert text.endswith("\n\nexplain")


async def test_busy_session_and_unknown_session_errors(client, scripted, workspace):
    scripted.add_scenario("slow", {"steps": [
        # 10 s unless cancelled: it still runs after the round trips below on a busy machine
        {"content": [{"type": "text", "text": "x" * 400}], "chunk": 4, "delayMs": 100}]})
    sid = await new_session(client, workspace, "slow")
    turn = asyncio.ensure_future(client.call("turn/start", {"sessionId": sid, "prompt": "a"}))
    await client.wait_for_event("textDelta")
    try:
        await client.call("turn/start", {"sessionId": sid, "prompt": "b"})
    except Exception as exc:
        assert "already running" in str(exc)
    else:
        raise AssertionError("a second turn on a busy session was accepted")
    try:
        await client.call("turn/start", {"sessionId": "nope", "prompt": "b"})
    except Exception as exc:
        assert "no session 'nope'" in str(exc)
    else:
        raise AssertionError("an unknown session was accepted")
    client.protocol.notify("turn/cancel", {"sessionId": sid})
    assert (await asyncio.wait_for(turn, 10))["reason"] == "cancelled"


async def test_client_without_permission_support_gets_safe_default(daemon_env, daemon_command,
                                                                   scripted, workspace):
    scripted.add_scenario("edit", read_grep_edit())
    c = await lsp.start(daemon_env, daemon_command, permission_requests=False)
    try:
        sid = await new_session(c, workspace, "edit")
        result = await c.call("turn/start", {"sessionId": sid, "prompt": "go"})
    finally:
        await lsp.stop(c)
    assert result["reason"] == "completed"
    assert c.permission_requests == []
    answered = c.turn_events("permissionAnswered")[0]
    assert answered["decision"] == "reject" and "cannot answer" in answered["reason"]
    assert "'Hello, ' + name" in (workspace / "app.py").read_text()


async def test_unanswered_permission_times_out_as_rejection(daemon_env, daemon_command,
                                                             scripted, workspace):
    scripted.add_scenario("edit", read_grep_edit())
    scripted.add_scenario("chat", {"steps": [{"content": [{"type": "text", "text": "still here"}]}]})
    c = await lsp.start(dict(daemon_env, HEDDLE_PERMISSION_TIMEOUT="0.5"), daemon_command)

    async def slow(params):
        await asyncio.sleep(1.5)  # answers after the daemon stopped waiting
        return {"decision": "allowOnce"}

    c.answer = slow
    try:
        sid = await new_session(c, workspace, "edit")
        result = await c.call("turn/start", {"sessionId": sid, "prompt": "go"})
        await asyncio.sleep(1.5)  # let the late answer (or its cancellation) arrive
        other = await new_session(c, workspace, "chat")
        again = await c.call("turn/start", {"sessionId": other, "prompt": "hi"})
    finally:
        await lsp.stop(c)
    assert result["reason"] == "completed" and again["text"] == "still here"
    answered = c.turn_events("permissionAnswered")[0]
    assert answered["decision"] == "reject" and answered["reason"] == "no answer within 0.5 s"
    assert "'Hello, ' + name" in (workspace / "app.py").read_text()
    log = (workspace.parent / "heddle.log").read_text()
    assert "Traceback" not in log
