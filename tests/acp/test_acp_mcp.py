"""ACP's `session/new.mcpServers` onto the core's MCP seam: the client's servers become the
session's (source `client`), the answer's `_meta` says what each is; SSE is refused."""

from __future__ import annotations

from acp.schema import EnvVariable, McpServerStdio, SseMcpServer

from acp_harness import agent


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
