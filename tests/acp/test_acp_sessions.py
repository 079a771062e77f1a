"""Sessions across agents: `session/load` replays a transcript (after a kill too),
`session/list`, `session/resume`, and `/compact`."""

from __future__ import annotations

import asyncio
import signal

import pytest
from acp import RequestError, text_block

from acp_harness import Recorder, agent


async def running_shows(client: Recorder, text: str) -> None:
    """Return once a tool call's live output shows `text`."""
    while not any(text in str(call.get("content")) for call in client.calls().values()):
        await asyncio.sleep(0.01)


async def test_load_after_a_kill_replays_and_closes_every_call(scripted, daemon_env, workspace):
    scripted.add_scenario("crash", {"steps": [
        {"content": [{"type": "text", "text": "Reading."},
                     {"type": "tool_use", "name": "Read", "input": {"path": "app.py"}}]},
        {"content": [{"type": "text", "text": "It greets."}]},
        {"content": [{"type": "tool_use", "name": "Bash",
                      "input": {"command": "echo going; sleep 30"}}]},
        {"match": {"lastUserContains": "again"},
         "content": [{"type": "text", "text": "Back."}]},
    ]})
    env = {**daemon_env, "HEDDLE_MODEL": "crash"}
    first = Recorder()
    async with agent(env, workspace, first) as (conn, proc, _):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        sid = session.session_id
        await conn.set_session_mode(session_id=sid, mode_id="bypassPermissions")
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("What?")]), 30)
        running = asyncio.ensure_future(conn.prompt(session_id=sid,
                                                    prompt=[text_block("Run")]))
        await first.wait_for("tool_call", 2)
        await asyncio.wait_for(running_shows(first, "going"), 20)  # the command runs
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
        running.cancel()

    second = Recorder()
    async with agent(env, workspace, second) as (conn, _, init):
        assert init.agent_capabilities.load_session
        listed = await conn.list_sessions(cwd=str(workspace))
        assert [s.session_id for s in listed.sessions] == [sid]
        assert listed.sessions[0].cwd == str(workspace)
        loaded = await asyncio.wait_for(conn.load_session(
            cwd=str(workspace), session_id=sid, mcp_servers=[]), 30)
        assert loaded.modes.current_mode_id in ("default", "bypassPermissions")
        replay = list(second.updates)
        assert [u["content"]["text"] for u in replay
                if u["sessionUpdate"] == "user_message_chunk"] == ["What?", "Run"]
        assert second.text() == "Reading.It greets."
        calls = second.calls()
        assert [c["kind"] for c in calls.values()] == ["read", "execute"]
        assert [c["status"] for c in calls.values()] == ["completed", "failed"]
        result = await asyncio.wait_for(conn.prompt(session_id=sid,
                                                    prompt=[text_block("Try again")]), 30)
    assert result.stop_reason == "end_turn"
    assert second.text().endswith("Back.")


async def test_resume_keeps_the_conversation_without_a_replay(scripted, daemon_env, workspace):
    scripted.add_scenario("resume", {"steps": [
        {"content": [{"type": "text", "text": "One."}]},
        {"content": [{"type": "text", "text": "Two."}]}]})
    env = {**daemon_env, "HEDDLE_MODEL": "resume"}
    async with agent(env, workspace) as (conn, _, _):
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("1")]), 30)
        await conn.set_session_mode(session_id=sid, mode_id="plan")
    client = Recorder()
    async with agent(env, workspace, client) as (conn, _, _):
        resumed = await conn.resume_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
        assert resumed.modes.current_mode_id == "plan"  # the mode the user chose, kept
        assert "agent_message_chunk" not in client.kinds()
        result = await asyncio.wait_for(conn.prompt(session_id=sid,
                                                    prompt=[text_block("2")]), 30)
        assert result.stop_reason == "end_turn" and client.text() == "Two."
        with pytest.raises(RequestError) as err:
            await conn.load_session(cwd=str(workspace), session_id="f" * 32, mcp_servers=[])
        assert err.value.code == -32002
    history = scripted.requests_for("resume")[1].body["messages"]
    assert [m["role"] for m in history] == ["user", "assistant", "user"]
    assert "One." in str(history[1]["content"])


async def test_compact_is_a_slash_command(scripted, daemon_env, workspace):
    scripted.add_scenario("chat", {"steps": [
        {"content": [{"type": "text", "text": "First answer. " * 50}]},
        {"content": [{"type": "text", "text": "Second answer. " * 50}]},
        {"content": [{"type": "text", "text": "Third answer. " * 50}]},
        {"content": [{"type": "text", "text": "<summary>We chatted.</summary>"}]}]})
    client = Recorder()
    env = {**daemon_env, "HEDDLE_MODEL": "chat"}
    async with agent(env, workspace, client) as (conn, _, _):
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        await client.wait_for("available_commands_update")
        [commands] = client.of("available_commands_update")
        assert [c["name"] for c in commands["availableCommands"]] == ["compact"]
        for word in ("one", "two", "three"):
            await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block(word)]), 30)
        client.updates.clear()
        result = await asyncio.wait_for(conn.prompt(session_id=sid,
                                                    prompt=[text_block("/compact")]), 30)
    assert result.stop_reason == "end_turn"
    assert client.text().startswith("Compacted the conversation:"), client.text()
    assert [u for u in client.raw if u["sessionUpdate"].startswith("compaction")] == []
    assert len(scripted.requests_for("chat")) == 4


async def test_the_environments_compact_model_is_used_as_on_the_lsp_door(scripted, daemon_env,
                                                                        workspace):
    scripted.add_scenario("talk", {"steps": [
        {"content": [{"type": "text", "text": f"Answer {n}. " * 50}]} for n in range(3)]})
    scripted.add_scenario("summ", {"steps": [
        {"content": [{"type": "text", "text": "<summary>We talked.</summary>"}]}]})
    client = Recorder()
    env = {**daemon_env, "HEDDLE_MODEL": "talk", "HEDDLE_COMPACT_MODEL": "summ"}
    async with agent(env, workspace, client) as (conn, _, _):
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        for word in ("one", "two", "three"):
            await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block(word)]), 30)
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("/compact")]), 30)
    assert client.text().endswith(" tokens."), client.text()[-200:]
    assert len(scripted.requests_for("summ")) == 1  # HEDDLE_COMPACT_MODEL wrote the summary
    assert len(scripted.requests_for("talk")) == 3
