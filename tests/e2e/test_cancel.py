"""Cancelling turns: during streaming, during a tool, by $/cancelRequest, by shutdown."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from lsprotocol import types as lsp_types

from e2e import lsp
from e2e.test_turns import new_session
from procs import alive, all_dead

SLOW_TEXT = {"content": [{"type": "text", "text": "word " * 400}], "chunk": 5, "delayMs": 10}
AFTER = {"content": [{"type": "text", "text": "Continuing."}]}


async def wait_for_file(path: Path, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while not path.exists() or not path.read_text().strip():
        assert time.monotonic() < deadline, f"{path} never appeared"
        await asyncio.sleep(0.02)
    return path.read_text().strip()


async def test_cancel_during_streaming_then_continue(client, scripted, workspace):
    scripted.add_scenario("s", {"steps": [SLOW_TEXT, AFTER]})
    sid = await new_session(client, workspace, "s")
    turn = asyncio.ensure_future(client.call("turn/start", {"sessionId": sid, "prompt": "go"}))
    await client.wait_for_event("textDelta")
    started = time.monotonic()
    client.protocol.notify("turn/cancel", {"sessionId": sid})
    client.protocol.notify("turn/cancel", {"sessionId": sid})  # idempotent

    result = await asyncio.wait_for(turn, 10)

    assert (result["reason"], result["cancelPhase"]) == ("cancelled", "streaming")
    assert time.monotonic() - started < 2.0
    assert result["text"].startswith("word")
    follow = await client.call("turn/start", {"sessionId": sid, "prompt": "again"})
    assert follow["reason"] == "completed"
    messages = scripted.requests_for("s")[1].body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert "interrupted" in messages[2]["content"][0]["text"]
    assert messages[2]["content"][-1]["text"] == "again"


async def test_cancel_during_tool_kills_process_group(client, scripted, workspace):
    command = "sleep 60 & echo $! > child.pid; echo $$ > shell.pid; wait"
    scripted.add_scenario("t", {"steps": [
        {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": command}}]},
        AFTER]})
    sid = await new_session(client, workspace, "t")
    turn = asyncio.ensure_future(client.call("turn/start", {"sessionId": sid, "prompt": "go"}))
    child = int(await wait_for_file(workspace / "child.pid"))
    shell = int(await wait_for_file(workspace / "shell.pid"))
    assert alive(child) and alive(shell)

    client.protocol.notify("turn/cancel", {"sessionId": sid})
    result = await asyncio.wait_for(turn, 10)

    assert (result["reason"], result["cancelPhase"]) == ("cancelled", "tools")
    assert await all_dead([shell, child])
    assert client.turn_events("toolCallFinished")[-1]["status"] == "cancelled"
    follow = await client.call("turn/start", {"sessionId": sid, "prompt": "what happened?"})
    assert follow["reason"] == "completed"
    last_user = scripted.requests_for("t")[1].body["messages"][-1]["content"]
    assert last_user[0]["type"] == "tool_result" and last_user[0]["is_error"] is True
    assert "cancelled" in last_user[0]["content"]


async def test_cancel_request_resolves_turn_as_cancelled(client, scripted, workspace):
    scripted.add_scenario("s", {"steps": [SLOW_TEXT]})
    sid = await new_session(client, workspace, "s")
    turn = asyncio.ensure_future(client.protocol.send_request_async(
        "turn/start", {"sessionId": sid, "prompt": "go"}, msg_id=4242))
    await client.wait_for_event("textDelta")
    client.protocol.notify("$/cancelRequest", lsp_types.CancelParams(id=4242))
    result = await asyncio.wait_for(turn, 10)
    assert (result["reason"], result["cancelPhase"]) == ("cancelled", "streaming")


async def test_cancel_while_permission_pending(client, scripted, workspace):
    scripted.add_scenario("p", {"steps": [
        {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": "touch ran"}}]},
        AFTER]})
    asked = asyncio.Event()
    never = asyncio.get_running_loop().create_future()

    async def hold(params):
        asked.set()
        return await never  # the user never answers

    client.answer = hold
    sid = await new_session(client, workspace, "p")
    turn = asyncio.ensure_future(client.call("turn/start", {"sessionId": sid, "prompt": "go"}))
    await asyncio.wait_for(asked.wait(), 10)
    client.protocol.notify("turn/cancel", {"sessionId": sid})
    result = await asyncio.wait_for(turn, 10)
    assert (result["reason"], result["cancelPhase"]) == ("cancelled", "tools")
    assert not (workspace / "ran").exists()
    never.cancel()


async def test_shutdown_while_turn_runs(daemon_env, daemon_command, scripted, workspace):
    scripted.add_scenario("s", {"steps": [SLOW_TEXT]})
    c = await lsp.start(daemon_env, daemon_command)
    sid = await new_session(c, workspace, "s")
    turn = asyncio.ensure_future(c.call("turn/start", {"sessionId": sid, "prompt": "go"}))
    await c.wait_for_event("textDelta")
    started = time.monotonic()
    await asyncio.wait_for(c.shutdown_session(), 10)
    result = await asyncio.wait_for(turn, 10)
    assert result["reason"] == "cancelled"
    assert time.monotonic() - started < 3.0
    await c.stop()
