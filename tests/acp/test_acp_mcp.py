"""ACP's `session/new.mcpServers` onto the core's MCP seam: the client's servers become the
session's (source `client`), the answer's `_meta` says what each is; SSE is refused; a real
stdio server (tests/e2e/mcp_server.py, on the `mcp` SDK) is called through a permission and
stopped by `session/close`."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from acp import text_block
from acp.schema import EnvVariable, McpServerStdio, SseMcpServer

from acp_harness import Recorder, agent


async def test_mcp_servers_of_the_client_are_the_sessions(daemon_env, workspace, tmp_path):
    settings = tmp_path / "config" / "heddle" / "settings.toml"
    settings.parent.mkdir(parents=True)
    settings.write_text("[mcp]\nstartup_timeout = 1\n")
    servers = [
        McpServerStdio(name="nothing", command=str(tmp_path / "no-such-server"), args=["-x"],
                       env=[EnvVariable(name="TOKEN", value="s3cret")]),
        SseMcpServer(type="sse", name="old", url="http://127.0.0.1:9/sse", headers=[]),
    ]
    async with agent(daemon_env, workspace) as (conn, _, _):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=servers)
    mcp = session.field_meta["heddle"]["mcp"]
    [server] = mcp["servers"]
    assert (server["name"], server["transport"], server["source"]) == ("nothing", "stdio",
                                                                       "client")
    assert server["state"] != "ready" and server["tools"] == []
    assert any("old" in p and "sse" in p for p in mcp["problems"])
    assert "s3cret" not in (tmp_path / "heddle.log").read_text()


SERVER = Path(__file__).parents[1] / "e2e" / "mcp_server.py"


async def test_a_clients_stdio_server_is_called_through_a_permission(
        scripted, daemon_env, workspace, tmp_path):
    settings = tmp_path / "config" / "heddle" / "settings.toml"
    settings.parent.mkdir(parents=True)
    settings.write_text("[mcp]\nstartup_timeout = 40\n")  # a loaded machine starts it slowly
    starts = tmp_path / "starts.txt"
    scripted.add_scenario("mcp", {"steps": [
        {"content": [{"type": "tool_use", "name": "mcp__srv__echo", "input": {"text": "hi"}}]},
        {"content": [{"type": "text", "text": "Echoed."}]}]})
    server = McpServerStdio(name="srv", command=sys.executable, args=["-I", str(SERVER)],
                            env=[EnvVariable(name="MCP_TEST_STARTS", value=str(starts))])
    client = Recorder()
    async with agent({**daemon_env, "HEDDLE_MODEL": "mcp"}, workspace, client) as (conn, proc, _):
        session = await asyncio.wait_for(conn.new_session(cwd=str(workspace),
                                                          mcp_servers=[server]), 45)
        [srv] = session.field_meta["heddle"]["mcp"]["servers"]
        assert (srv["name"], srv["state"], srv["source"]) == ("srv", "ready", "client")
        assert "mcp__srv__echo" in srv["tools"]
        result = await asyncio.wait_for(conn.prompt(session_id=session.session_id,
                                                    prompt=[text_block("Echo")]), 30)
        [pid] = [int(p) for p in starts.read_text().split()]
        await asyncio.wait_for(conn.close_session(session_id=session.session_id), 15)
        assert not Path(f"/proc/{pid}").exists()  # session/close stopped its server
        assert proc.returncode is None
    assert result.stop_reason == "end_turn"
    [asked] = client.permissions  # asking by default, as for any tool no rule allows
    [(call_id, call)] = client.calls().items()
    assert asked["toolCall"]["toolCallId"] == call_id
    assert call["kind"] == "other" and call["status"] == "completed"
    sent = scripted.requests_for("mcp")[1].body["messages"][-1]["content"]
    assert [b["content"] for b in sent if b["type"] == "tool_result"] == ["echo: hi"]


async def test_a_server_that_dies_between_prompts_is_told_in_an_agent_message(
        scripted, daemon_env, workspace, tmp_path):
    settings = tmp_path / "config" / "heddle" / "settings.toml"
    settings.parent.mkdir(parents=True)
    settings.write_text('[mcp]\nstartup_timeout = 40\n\n[permissions]\nallow = ["mcp__srv"]\n')
    die, secret = tmp_path / "die", "hunter2-acp-client-env"
    scripted.add_scenario("mcp", {"steps": [
        {"content": [{"type": "tool_use", "name": "mcp__srv__echo", "input": {"text": "back"}}]},
        {"content": [{"type": "text", "text": "Echoed."}]}]})
    server = McpServerStdio(name="srv", command=sys.executable, args=["-I", str(SERVER)], env=[
        EnvVariable(name="MCP_TEST_DIE", value=str(die)),
        EnvVariable(name="SRV_SECRET", value=secret)])
    client = Recorder()

    def told() -> list[dict]:
        return [u for u in client.raw_of("agent_message_chunk") if "_meta" in u]

    async def until_told(count: int) -> list[dict]:
        while len(told()) < count:
            await asyncio.sleep(0.01)
        return told()

    async with agent({**daemon_env, "HEDDLE_MODEL": "mcp"}, workspace, client) as (conn, _, _):
        session = await asyncio.wait_for(conn.new_session(cwd=str(workspace),
                                                          mcp_servers=[server]), 45)
        die.touch()  # between prompts: only the watch of its process can notice
        stopped, again = await asyncio.wait_for(until_told(2), 30)
        result = await asyncio.wait_for(conn.prompt(session_id=session.session_id,
                                                    prompt=[text_block("Echo")]), 30)

    message = "MCP server srv stopped (exited with code 5); restarting it in 0.5 s (restart 1 of 3)."
    last = [f"loading the index: part {i}" for i in range(32, 40)] + [
        "token: [secret]", "error: the index is corrupt"]
    assert stopped["content"]["text"] == ("\n\n**" + message + "**\n\nIts last output:\n```\n"
                                          + "\n".join(last) + "\n```\n\n")
    meta = stopped["_meta"]["heddle"]
    assert (meta["message"], meta["stderr"], meta["restartInMs"]) == (message, last, 500)
    assert meta["mcpServer"]["state"] == "restarting"
    assert again["_meta"]["heddle"]["mcpServer"]["state"] == "ready"
    assert again["content"]["text"] == "\n\n**MCP server srv is running again (restart 1 of 3).**\n\n"
    assert stopped["messageId"] != again["messageId"]
    assert secret not in str(client.raw)
    assert result.stop_reason == "end_turn"
    sent = scripted.requests_for("mcp")[1].body["messages"][-1]["content"]
    assert [b["content"] for b in sent if b["type"] == "tool_result"] == ["echo: back"]
