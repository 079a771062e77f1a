"""ACP's `mcpServers` (session/new, load, resume) onto the core's MCP seam.

A stdio server and a streamable HTTP server become `McpServerConfig`s (source `client`),
after the servers of the settings files; `heddle.mcp.servers.start_servers` starts them all
in parallel, waiting the settings' `mcp.startup_timeout` at most. SSE servers and ACP-hosted
ones are not supported: they are reported in the answer's `_meta`, never started.

What happens to a server after that answer (it dies and is restarted, runs again, fails for
good) is told as an agent message of its own (`change_update`): ACP has no warning of its own,
and a message is what every client shows. Its `_meta.heddle.mcpServer` has the server's state
as Heddle's `mcpServer/changed` does.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from acp.schema import HttpMcpServer, McpServerStdio

from heddle.mcp.config import McpServerConfig, from_settings
from heddle.mcp.servers import STARTUP_BOUND, McpServers, ServerChange, start_servers
from heddle.sessions.session import Session
from heddle.settings import LoadedSettings


def configs(servers: list | None) -> tuple[list[McpServerConfig], list[str]]:
    """The client's servers as configs, and one line for each that cannot be used."""
    found: list[McpServerConfig] = []
    unsupported: list[str] = []
    for s in servers or []:
        if isinstance(s, McpServerStdio):
            found.append(McpServerConfig(s.name, command=s.command, args=tuple(s.args),
                                         env={e.name: e.value for e in s.env},
                                         source="client"))
        elif isinstance(s, HttpMcpServer):
            found.append(McpServerConfig(s.name, url=s.url,
                                         headers={h.name: h.value for h in s.headers},
                                         source="client"))
        else:
            kind = getattr(s, "type", type(s).__name__)
            unsupported.append(f"MCP server {getattr(s, 'name', '?')}: transport {kind} is "
                               "not supported (stdio and http are)")
    return found, unsupported


async def attach(session: Session, settings: LoadedSettings | None, servers: list | None
                 ) -> dict[str, Any]:
    """Start the session's MCP servers (its settings', then the client's); what the answer's
    `_meta.heddle.mcp` says of them."""
    client, unsupported = configs(servers)
    every = (from_settings(settings) if settings is not None else []) + client
    if session.mcp is not None:  # a live session taken back: its servers run already
        return report(session.mcp, unsupported)
    if not every:
        return report(None, unsupported)
    bound = settings.settings.mcp.startup_timeout if settings is not None else None
    session.mcp = await start_servers(every, session.workspace,
                                      STARTUP_BOUND if bound is None else bound)
    return report(session.mcp, unsupported)


def report(mcp: McpServers | None, unsupported: list[str]) -> dict[str, Any]:
    servers = [] if mcp is None else [
        {"name": s.name, "transport": s.transport, "source": s.source, "state": s.state,
         "tools": list(s.tools), **({"error": s.error} if s.error else {})}
        for s in mcp.status()]
    problems = unsupported + ([] if mcp is None else list(mcp.problems))
    return {"servers": servers, **({"problems": problems} if problems else {})}


def change_update(change: ServerChange) -> dict[str, Any]:
    """An agent message of its own (a new `messageId`) saying what happened to a server, with
    its last stderr lines in a code block."""
    said = f"\n\n**{change.message}**\n"
    if change.stderr:
        shown = "\n".join(change.stderr)
        longest = max((len(run) for run in re.findall("`+", shown)), default=0)
        fence = "`" * max(3, longest + 1)  # a fence no line of it can close
        said += f"\nIts last output:\n{fence}\n{shown}\n{fence}\n"
    said += "\n"  # the answer's text that may follow stays apart
    s = change.status
    server = {"name": s.name, "transport": s.transport, "source": s.source, "state": s.state,
              "tools": list(s.tools), "restarts": s.restarts, **({"error": s.error} if s.error
                                                                 else {})}
    meta = {"mcpServer": server, "message": change.message, "stderr": list(change.stderr),
            **({"restartInMs": round(change.restart_in * 1000)}
               if change.restart_in is not None else {})}
    return {"sessionUpdate": "agent_message_chunk", "messageId": f"mcp-{uuid.uuid4().hex}",
            "content": {"type": "text", "text": said}, "_meta": {"heddle": meta}}
