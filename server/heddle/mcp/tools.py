"""Each tool of an MCP server as a Heddle `Tool`: `mcp__<server>__<tool>`, with the server's
input schema, through the same permission pipeline as the built-in tools.

An MCP tool is not read-only (so it asks, in the default mode) unless the server marks it
`readOnlyHint` *and* the user's settings say to believe that server (`trust_read_only`): a
hint is the server's claim, not a fact.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable, Protocol

from heddle.core.events import Preview
from heddle.core.tools import Tool, ToolContext, ToolOutput
from heddle.mcp.config import McpServerConfig, NAME_PART

log = logging.getLogger(__name__)

MAX_NAME = 64
"""The Messages API's limit on a tool's name."""
MAX_DESCRIPTION = 2048
"""Characters of a server's description of a tool kept for the model."""
MAX_RESULT_CHARS = 50_000


class Server(Protocol):
    """What a tool needs of its server (`heddle.mcp.servers.Server`)."""

    config: McpServerConfig
    listed: Any

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any: ...


class McpTool:
    """One tool of one server (an instance per tool: name and schema are the server's)."""

    concurrency_safe = False
    max_result_chars = MAX_RESULT_CHARS
    input_type: Any = dict[str, Any]
    """The server validates its arguments; Heddle only checks they are a JSON object."""

    def __init__(self, server: Server, remote: str, name: str, description: str,
                 input_schema: dict[str, Any], read_only: bool, shown: str | None) -> None:
        self.server = server
        self.remote = remote
        self.name = name
        self.description = description
        self.read_only = read_only
        self.shown = shown or remote
        self.definition = {"name": name, "description": description,
                           "input_schema": input_schema}
        """What the model is sent, built once so that every turn sends the same bytes."""

    def title(self, inp: Any, ctx: ToolContext) -> str:
        return f"{self.server.config.name}: {self.shown}"

    def prompt_title(self, inp: Any, ctx: ToolContext) -> str:
        return self.title(inp, ctx)

    def normalise(self, inp: Any, ctx: ToolContext) -> Any:
        return inp

    async def preview(self, inp: Any, ctx: ToolContext) -> Preview | None:
        return None

    def rule_for(self, inp: Any, ctx: ToolContext) -> str:
        return self.name

    async def run(self, inp: Any, ctx: ToolContext) -> ToolOutput:
        result = await self.server.call(self.remote, inp)
        summary = "error" if result.is_error else _summary(result.text, len(result.images))
        return ToolOutput(result.text, summary, is_error=result.is_error, images=result.images)


def _summary(text: str, images: int) -> str:
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    first = first if len(first) <= 80 else first[:79] + "…"
    shown = f"{images} image{'s' if images > 1 else ''}" if images else ""
    return " + ".join(part for part in (first, shown) if part) or "done"


def tools_of(servers: Iterable[Server]) -> dict[str, Tool]:
    """Every listed tool of `servers`, sorted by name; a name two tools would share (after
    making it fit the API's rules) keeps the first and logs the other."""
    found: dict[str, McpTool] = {}
    for server in servers:
        config = server.config
        for remote in server.listed or ():
            name = (config.prefix + _fit(remote.name))[:MAX_NAME]
            if name in found:
                log.warning("MCP server %s: tool %s would be named %s like another; skipped",
                            config.name, remote.name, name)
                continue
            description = remote.description[:MAX_DESCRIPTION]
            found[name] = McpTool(server, remote.name, name, description, remote.input_schema,
                                  remote.read_only_hint and config.trust_read_only, remote.title)
    return {name: found[name] for name in sorted(found)}  # type: ignore[misc]


def _fit(name: str) -> str:
    return NAME_PART.sub("_", name)
