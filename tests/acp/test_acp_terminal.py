"""Bash in the client's terminal: only when the client advertised `terminal`; the terminal is
embedded in the tool call, the exit code reaches the model, a cancel releases it."""

from __future__ import annotations

import asyncio

from acp import text_block

from acp_harness import Recorder, agent, capabilities


def bash(command: str, **more) -> dict:
    return {"type": "tool_use", "name": "Bash", "input": {"command": command, **more}}


async def test_bash_runs_in_the_clients_terminal(scripted, daemon_env, workspace):
    scripted.add_scenario("term", {"steps": [
        {"content": [bash("echo from-the-terminal; exit 3")]},
        {"match": {"lastUserContains": "from-the-terminal"},
         "content": [{"type": "text", "text": "Done."}]}]})
    client = Recorder()
    async with agent({**daemon_env, "HEDDLE_MODEL": "term"}, workspace, client,
                     capabilities(terminal=True)) as (conn, _, _):
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        result = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("Run")]),
                                        30)
    assert result.stop_reason == "end_turn"
    [term] = client.terminals.values()
    assert term["command"] == ["/bin/bash", "-c", "echo from-the-terminal; exit 3"]
    assert term["released"]
    [call] = client.calls().values()
    assert call["content"][0] == {"type": "terminal", "terminalId": "term-0"}
    assert call["status"] == "failed" and call["rawOutput"]["exitCode"] == 3
    sent = scripted.requests_for("term")[1].body["messages"][-1]["content"][0]["content"]
    assert sent.startswith("Exit code 3\nfrom-the-terminal")


async def test_without_terminal_bash_runs_in_heddle(scripted, daemon_env, workspace):
    scripted.add_scenario("local", {"steps": [
        {"content": [bash("echo local", description="Say local")]},
        {"content": [{"type": "text", "text": "Done."}]}]})
    client = Recorder()
    async with agent({**daemon_env, "HEDDLE_MODEL": "local"}, workspace, client) as (conn, _, _):
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("Run")]), 30)
    assert client.terminals == {}
    [call] = client.calls().values()
    assert call["status"] == "completed" and "local" in str(call["content"])
    assert call["title"] == "Say local"  # the model's description is the call's title


async def test_cancel_releases_the_terminal(scripted, daemon_env, workspace):
    scripted.add_scenario("long", {"steps": [{"content": [bash("sleep 30")]}]})
    client = Recorder()
    async with agent({**daemon_env, "HEDDLE_MODEL": "long"}, workspace, client,
                     capabilities(terminal=True)) as (conn, _, _):
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        prompt = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("Run")]))

        async def running():
            while not client.terminals:
                await asyncio.sleep(0.01)
        await asyncio.wait_for(running(), 20)
        await conn.cancel(session_id=sid)
        result = await asyncio.wait_for(prompt, 15)
    assert result.stop_reason == "cancelled"
    [term] = client.terminals.values()
    assert term["released"] and term["proc"].returncode is not None
    [call] = client.calls().values()
    assert call["status"] == "failed"
