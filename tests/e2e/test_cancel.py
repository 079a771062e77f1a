"""Cancelling turns: during streaming, during a tool, by $/cancelRequest, by shutdown."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from pathlib import Path

import pytest
from lsprotocol import types as lsp_types

from e2e import lsp
from e2e.bodies import messages_of
from e2e.crashable import SLEEPER, after, file_appears, reap_sleeper, replay_problems
from e2e.test_bad_input import RawDaemon
from e2e.test_repeats import guard_off
from e2e.test_turns import new_session
from procs import alive, all_dead

SLOW_TEXT = {"content": [{"type": "text", "text": "word " * 400}], "chunk": 5, "delayMs": 100}
"""40 s of streaming: far longer than any wait for its cancel, however loaded the machine."""
AFTER = {"content": [{"type": "text", "text": "Continuing."}]}


async def wait_for_file(path: Path, timeout: float = 30.0) -> str:
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
    client.protocol.notify("turn/cancel", {"sessionId": sid})
    client.protocol.notify("turn/cancel", {"sessionId": sid})  # idempotent

    result = await asyncio.wait_for(turn, 10)

    assert (result["reason"], result["cancelPhase"]) == ("cancelled", "streaming")
    assert result["text"].startswith("word")
    # the input its message_start reported is billed, so it counts, cancelled or not
    (cancelled,) = scripted.requests_for("s")
    billed = cancelled.cache.usage()
    u = result["usage"]
    assert (u.get("inputTokens", 0), u.get("cacheReadInputTokens", 0),
            u.get("cacheCreationInputTokens", 0), u["modelCalls"]) == (
        billed["input_tokens"], billed["cache_read_input_tokens"],
        billed["cache_creation_input_tokens"], 1)
    assert sum(billed[k] for k in ("input_tokens", "cache_read_input_tokens",
                                   "cache_creation_input_tokens")) > 0
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


async def test_cancel_request_during_a_tool_cancels_the_turn(client, scripted, workspace):
    # pygls on its own would cancel the request's task: the loop would close the conversation,
    # but the tool's task, not in that task's cancel scope, would run on (here 60 s)
    command = "sleep 60 & echo $! > child.pid; wait"
    scripted.add_scenario("t", {"steps": [
        {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": command}}]},
        AFTER]})
    sid = await new_session(client, workspace, "t", permissionMode="bypassPermissions")
    turn = asyncio.ensure_future(client.protocol.send_request_async(
        "turn/start", {"sessionId": sid, "prompt": "go"}, msg_id="turn-7"))
    child = int(await wait_for_file(workspace / "child.pid"))
    client.protocol.notify("$/cancelRequest", lsp_types.CancelParams(id="turn-7"))
    result = await asyncio.wait_for(turn, 10)
    assert (result["reason"], result["cancelPhase"]) == ("cancelled", "tools")
    assert await all_dead([child])
    (finished,) = client.turn_events("toolCallFinished")
    assert finished["status"] == "cancelled"
    follow = await client.call("turn/start", {"sessionId": sid, "prompt": "and now?"})
    assert follow["reason"] == "completed"


GROUPS = {  # commands whose process group outlives a plain SIGTERM to it, or its leader
    # the leader waits; a sleeper ignores SIGTERM, another was orphaned by its subshell
    "leader waits": "sleep 30 & echo $! > 1.pid; (trap '' TERM; exec sleep 30) & echo $! > 2.pid;"
                    " (sleep 30 & echo $! > 3.pid); echo $$ > leader.pid; echo started; wait",
    # the leader has exited; the orphaned sleepers keep the call's output open
    "leader gone": "(sleep 30 & echo $! > 1.pid); (trap '' TERM; exec sleep 30) & echo $! > 2.pid;"
                   " echo $$ > leader.pid; echo started",
    # the leader and all it starts ignore SIGTERM: SIGKILL after the grace period
    "all ignore TERM": "trap '' TERM; sleep 30 & echo $! > 1.pid; (sleep 30 & echo $! > 2.pid);"
                       " echo $$ > leader.pid; echo started; wait",
}


@pytest.mark.parametrize("command", list(GROUPS.values()), ids=list(GROUPS))
async def test_a_cancelled_turn_resolves_once_no_process_of_its_command_runs(
        command, client, scripted, workspace):
    scripted.add_scenario("t", {"steps": [
        {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": command}}]},
        AFTER]})
    sid = await new_session(client, workspace, "t", permissionMode="bypassPermissions")
    turn = asyncio.ensure_future(client.call("turn/start", {"sessionId": sid, "prompt": "go"}))
    leader = int(await wait_for_file(workspace / "leader.pid"))
    pids = [leader] + [int(await wait_for_file(workspace / name))
                       for name in re.findall(r"\b\d\.pid", command)]  # the sleepers
    try:
        if "wait" not in command:
            assert await all_dead([leader], within=10)  # the leader is gone before the cancel
        assert all(alive(p) for p in pids[1:])
        client.protocol.notify("turn/cancel", {"sessionId": sid})
        result = await asyncio.wait_for(turn, 15)
        running = [p for p in pids if alive(p)]  # at once: the turn waited for them
        assert (result["reason"], result["cancelPhase"], running) == ("cancelled", "tools", [])
    finally:
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


async def test_turn_cancel_for_another_turn_leaves_the_running_turn_alone(client, scripted,
                                                                          workspace):
    quick = {"content": [{"type": "text", "text": "Hi."}]}
    bash = {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": "echo ran"}}]}
    scripted.add_scenario("s", {"steps": [quick, bash, AFTER, bash, AFTER]})
    asked: asyncio.Queue = asyncio.Queue()

    async def hold(params):  # the turn waits here until the test answers
        answer = asyncio.get_running_loop().create_future()
        await asyncio.wait_for(asked.put((params["turnId"], answer)), 10)
        return await answer

    client.answer = hold
    sid = await new_session(client, workspace, "s")
    earlier = (await client.call("turn/start", {"sessionId": sid, "prompt": "hi"}))["turnId"]

    turn = asyncio.ensure_future(client.call("turn/start", {"sessionId": sid, "prompt": "go"}))
    running, answer = await asyncio.wait_for(asked.get(), 10)
    for other in (earlier, "no-such-turn"):
        client.protocol.notify("turn/cancel", {"sessionId": sid, "turnId": other})
    await client.call("session/list", {})  # the notifications before it have been handled
    if not answer.done():  # (a cancelled turn has withdrawn its question)
        answer.set_result({"decision": "allowOnce"})
    result = await asyncio.wait_for(turn, 10)
    assert (result["turnId"], result["reason"], result.get("text")) == (
        running, "completed", "Continuing.")

    turn = asyncio.ensure_future(client.call("turn/start", {"sessionId": sid, "prompt": "go"}))
    running, answer = await asyncio.wait_for(asked.get(), 10)
    client.protocol.notify("turn/cancel", {"sessionId": sid, "turnId": running})
    result = await asyncio.wait_for(turn, 10)
    assert (result["turnId"], result["reason"]) == (running, "cancelled")
    answer.cancel()


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
    await asyncio.wait_for(asked.wait(), 30)
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
    await asyncio.wait_for(c.shutdown_session(), 10)
    result = await asyncio.wait_for(turn, 10)
    assert result["reason"] == "cancelled"  # within 10 s, of a 40 s answer
    await c.stop()


async def test_cancel_while_paused_for_a_stalled_editor_keeps_the_turns_work(
        daemon_env, daemon_command, scripted, workspace):
    """The editor stops reading, so the turn pauses once it holds enough for it; a cancel then
    ends the turn like any other cancel: the rounds it ran stay in the conversation."""
    text = "".join(f"line {i} of a long answer\n" for i in range(1200))  # ~30 KB a call
    step = {"content": [{"type": "text", "text": text},
                        {"type": "tool_use", "name": "Read",
                         "input": {"path": "README.md", "limit": 2}}], "chunk": 40}
    scripted.add_scenario("flood", {"repeat": True, "steps": [step]})
    guard_off(daemon_env)  # the same call again and again is the point here
    proc = await asyncio.create_subprocess_exec(
        *daemon_command, env=daemon_env, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    raw = RawDaemon(proc)
    try:
        await raw.initialize()
        sid = (await raw.request(2, "session/new", {"workspace": str(workspace),
                                                    "model": "flood"}))["result"]["sessionId"]
        raw.send({"jsonrpc": "2.0", "id": 3, "method": "turn/start",
                  "params": {"sessionId": sid, "prompt": "write a lot", "maxTurns": 60}})
        # Nothing is read from here on: the turn must stop asking the model.
        deadline = time.monotonic() + 40
        while not scripted.requests_for("flood"):  # the model client is still loading
            assert time.monotonic() < deadline, "no model request"
            await asyncio.sleep(0.02)
        calls, quiet_since = -1, time.monotonic()
        while time.monotonic() - quiet_since < 1.0:
            assert time.monotonic() < deadline, "the turn never paused"
            if len(scripted.requests_for("flood")) != calls:
                calls, quiet_since = len(scripted.requests_for("flood")), time.monotonic()
            await asyncio.sleep(0.02)
        assert 2 <= calls < 60

        raw.send({"jsonrpc": "2.0", "method": "turn/cancel", "params": {"sessionId": sid}})
        result = (await raw.request_reply(3, timeout=20))["result"]
        assert result["reason"] == "cancelled"

        scripted.add_scenario("after", {"steps": [AFTER]})
        raw.send({"jsonrpc": "2.0", "id": 4, "method": "turn/start",
                  "params": {"sessionId": sid, "prompt": "what happened?"}})
        # the next turn's model request carries the rounds the cancelled turn ran (found by its
        # prompt: under load, a last request of the cancelled turn may arrive after `calls`)
        def next_turns() -> list:
            return [r for r in scripted.requests_for("flood")
                    if r.body["messages"][-1]["content"][-1].get("text") == "what happened?"]
        deadline = time.monotonic() + 20
        while not next_turns():
            assert time.monotonic() < deadline, "no model request for the next turn"
            await asyncio.sleep(0.02)
        messages = next_turns()[0].body["messages"]
        assert [m["role"] for m in messages[:3]] == ["user", "assistant", "user"]
        tool_uses = [b for m in messages if m["role"] == "assistant" for b in m["content"]
                     if b["type"] == "tool_use"]
        results = [b for m in messages if m["role"] == "user" for b in m["content"]
                   if b["type"] == "tool_result"]
        assert len(tool_uses) >= calls - 1 and len(results) == len(tool_uses)
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


WRITE = {"type": "tool_use", "name": "Write", "input": {"path": "notes.txt",
                                                          "content": "a line of notes\n" * 200}}
READ = {"type": "tool_use", "name": "Read", "input": {"path": "app.py"}}
CANCEL_POINTS = {
    "streaming": ([SLOW_TEXT], "default", lambda d, ws: after(d, "textDelta")),
    "tool-input": ([{"content": [{"type": "text", "text": "Writing."}, WRITE], "chunk": 4,
                     "delayMs": 10}], "default", lambda d, ws: after(d, "toolCallStarted")),
    "read-done-input-streaming": (
        [{"content": [READ, WRITE], "chunk": 4, "delayMs": 10}], "default",
        lambda d, ws: after(d, "toolCallStarted", 2)),
    "permission": ([{"content": [{"type": "text", "text": "Running it."}, {
        "type": "tool_use", "name": "Bash", "input": {"command": "touch ran"}}]}], "default",
        lambda d, ws: asyncio.wait_for(d.permission_asked.wait(), 15)),
    "bash-running": ([{"content": [READ, {"type": "tool_use", "name": "Bash",
                                          "input": {"command": SLEEPER}}]}],
                     "bypassPermissions", lambda d, ws: file_appears(ws / "sleeper.pid")),
}


@pytest.mark.parametrize("point", list(CANCEL_POINTS))
async def test_cancelled_turn_loads_in_a_new_daemon_as_it_was(point, daemons, scripted,
                                                              workspace):
    """The transcript of a cancelled turn rebuilds the conversation the daemon had: a new
    daemon's next request starts with exactly the history the old one sent, and is valid."""
    steps, mode, trigger = CANCEL_POINTS[point]
    scripted.add_scenario(point, {"steps": steps + [AFTER, AFTER]})
    first = await daemons()
    first.answer = asyncio.get_running_loop().create_future()  # never answered
    sid = (await first.call("session/new", {"workspace": str(workspace), "model": point,
                                            "permissionMode": mode}))["sessionId"]
    turn = asyncio.ensure_future(first.call("turn/start", {"sessionId": sid, "prompt": "go"}))
    try:
        await trigger(first, workspace)
        first.conn.notify("turn/cancel", {"sessionId": sid})
        result = await asyncio.wait_for(turn, 15)
    finally:
        reap_sleeper(workspace)
    assert result["reason"] == "cancelled", result
    assert replay_problems(first.events, permissions=False) == []  # every started call finished
    complete = {e["event"]["toolCallId"] for e in first.events
                if e["event"]["kind"] == "toolCallInput"}
    assert all(e["event"]["status"] == "cancelled" for e in first.events
               if e["event"]["kind"] == "toolCallFinished"
               and e["event"]["toolCallId"] not in complete)
    follow = await first.call("turn/start", {"sessionId": sid, "prompt": "what happened?"})
    assert follow["reason"] == "completed", follow
    live = messages_of(scripted.requests_for(point)[-1].body)
    await first.stop()

    second = await daemons()
    loaded = await second.call("session/load", {"sessionId": sid})
    assert loaded.get("warnings", []) == []
    assert second.events == first.events  # the replay is what the editor was sent
    more = await second.call("turn/start", {"sessionId": sid, "prompt": "and now?"})
    assert more["reason"] == "completed", more
    sent = scripted.requests_for(point)[-1]
    assert sent.status == 200, sent.body
    assert messages_of(sent.body)[:len(live)] == live
    assert len(sent.body["messages"]) == len(live) + 2
