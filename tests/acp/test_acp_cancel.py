"""`session/cancel`: the prompt answers `cancelled`, and every tool call it reported is closed."""

from __future__ import annotations

import asyncio
import os

from acp import text_block

from acp_harness import Recorder, agent


def finished(client: Recorder) -> None:
    """Every tool call has a final status."""
    calls = client.calls()
    assert calls, "no tool call was reported"
    assert {c["status"] for c in calls.values()} <= {"completed", "failed"}, calls


async def test_cancel_mid_stream(scripted, daemon_env, workspace):
    scripted.add_scenario("slow", {"steps": [
        {"content": [{"type": "text", "text": "word " * 400}], "chunk": 5, "delayMs": 20}]})
    client = Recorder()
    async with agent({**daemon_env, "HEDDLE_MODEL": "slow"}, workspace, client) as (conn, _, _):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        prompt = asyncio.ensure_future(conn.prompt(session_id=session.session_id,
                                                   prompt=[text_block("Talk")]))
        await client.wait_for("agent_message_chunk")
        await conn.cancel(session_id=session.session_id)
        result = await asyncio.wait_for(prompt, 15)
    assert result.stop_reason == "cancelled"
    assert 0 < len(client.text()) < len("word " * 400)


async def test_cancel_mid_tool_closes_every_call(scripted, daemon_env, workspace):
    scripted.add_scenario("tool", {"steps": [
        {"content": [{"type": "tool_use", "name": "Bash",
                      "input": {"command": "echo started; sleep 30"}},
                     {"type": "tool_use", "name": "Read", "input": {"path": "app.py"}}]}]})
    client = Recorder()
    env = {**daemon_env, "HEDDLE_MODEL": "tool"}
    async with agent(env, workspace, client) as (conn, _, _):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        await conn.set_session_mode(session_id=session.session_id, mode_id="bypassPermissions")
        prompt = asyncio.ensure_future(conn.prompt(session_id=session.session_id,
                                                   prompt=[text_block("Run it")]))

        async def output_shown():
            while not any("started" in str(c.get("content")) for c in client.calls().values()):
                await asyncio.sleep(0.01)
        await asyncio.wait_for(output_shown(), 20)  # the command's live output, in its call
        await conn.cancel(session_id=session.session_id)
        result = await asyncio.wait_for(prompt, 15)
    assert result.stop_reason == "cancelled"
    finished(client)
    bash = next(c for c in client.calls().values() if c["kind"] == "execute")
    assert bash["status"] == "failed"
    assert bash["rawInput"] == {"command": "echo started; sleep 30"}


async def test_cancel_while_asking_closes_the_call(scripted, daemon_env, workspace):
    scripted.add_scenario("ask", {"steps": [
        {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": "true"}}]}]})
    client = Recorder()
    client.hold = asyncio.Event()  # the user has not answered yet
    async with agent({**daemon_env, "HEDDLE_MODEL": "ask"}, workspace, client) as (conn, _, _):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        prompt = asyncio.ensure_future(conn.prompt(session_id=session.session_id,
                                                   prompt=[text_block("Run it")]))
        await asyncio.wait_for(client.asked.wait(), 20)
        await conn.cancel(session_id=session.session_id)
        client.answers = ["cancelled"]  # as the spec asks of a client after session/cancel
        client.hold.set()
        result = await asyncio.wait_for(prompt, 15)
    assert result.stop_reason == "cancelled"
    finished(client)


async def test_sigterm_cancels_the_turn_and_kills_its_commands(scripted, daemon_env, workspace,
                                                               tmp_path):
    marker = tmp_path / "sleeper.pid"
    scripted.add_scenario("term", {"steps": [
        {"content": [{"type": "tool_use", "name": "Bash",
                      "input": {"command": f"echo $$ > {marker}; exec sleep 60"}}]}]})
    client = Recorder()
    async with agent({**daemon_env, "HEDDLE_MODEL": "term"}, workspace, client) as (conn, proc, _):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        await conn.set_session_mode(session_id=session.session_id, mode_id="bypassPermissions")
        prompt = asyncio.ensure_future(conn.prompt(session_id=session.session_id,
                                                   prompt=[text_block("Sleep")]))

        async def started():
            while not marker.exists() or not marker.read_text().strip():
                await asyncio.sleep(0.02)
        await asyncio.wait_for(started(), 20)
        proc.terminate()
        result = await asyncio.wait_for(prompt, 15)
        code = await asyncio.wait_for(proc.wait(), 15)
    assert result.stop_reason == "cancelled"
    assert code == 128 + 15
    finished(client)
    pid = int(marker.read_text())
    assert not os.path.exists(f"/proc/{pid}") or "Z" in open(f"/proc/{pid}/stat").read().split()[2]
