"""What one MCP server is: a command to run over stdio, or a streamable HTTP endpoint.

A session receives a list of these: from the settings files (`[mcp.servers.NAME]`, see
`from_settings`) and from its front door (ACP's `session/new.mcpServers`). The values of `env`
and `headers` are secrets: nothing logs them, and `__repr__` shows only their names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Literal, Mapping

from heddle.settings import LoadedSettings, McpServerSettings

Source = Literal["user", "project", "client"]
DEFAULT_CALL_TIMEOUT = 120.0
"""Seconds one tool call may take before it becomes an error result."""
NAME_PART = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class McpServerConfig:
    name: str
    """What the user calls it; its tools are `mcp__<name>__<tool>`."""
    command: str | None = None
    """stdio: the program to run (found on PATH); its stdin and stdout speak MCP."""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    """stdio: set over the tool environment (which holds no secrets of Heddle's)."""
    cwd: str | None = None
    """stdio: the folder it runs in; None: the session's workspace. Relative: to it."""
    url: str | None = None
    """Streamable HTTP: the endpoint (instead of `command`)."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Streamable HTTP: sent with every request (an `Authorization` header, say)."""
    pass_env: tuple[str, ...] = ()
    """stdio: secret-looking variables of Heddle's environment the server may see all the same."""
    trust_read_only: bool = False
    """Let a tool's `readOnlyHint` run it without asking (as Heddle's read-only tools do)."""
    timeout: float = DEFAULT_CALL_TIMEOUT
    """Seconds a tool call may take."""
    source: Source = "user"

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"

    @property
    def prefix(self) -> str:
        """`mcp__<name>__`, the name made fit for a tool name."""
        return f"mcp__{NAME_PART.sub('_', self.name)}__"

    def problem(self) -> str | None:
        """Why this server cannot be started as configured; None: it can."""
        if not self.name:
            return "an MCP server needs a name"
        if bool(self.command) == bool(self.url):
            return f"MCP server {self.name}: give either `command` (stdio) or `url` (HTTP)"
        if self.url and not self.url.startswith(("http://", "https://")):
            return f"MCP server {self.name}: url must start with http:// or https://"
        return None

    def __repr__(self) -> str:  # never the values of env or headers: they hold secrets
        what = self.url if self.url else " ".join((self.command or "", *self.args))
        return (f"McpServerConfig({self.name!r}, {self.transport} {what!r}, env={sorted(self.env)}, "
                f"headers={sorted(self.headers)}, source={self.source})")

    __str__ = __repr__


def _config(name: str, s: McpServerSettings, source: Source) -> McpServerConfig:
    return McpServerConfig(name, s.command, tuple(s.args), dict(s.env), s.cwd, s.url,
                           dict(s.headers), tuple(s.pass_env), s.trust_read_only,
                           s.timeout if s.timeout is not None else DEFAULT_CALL_TIMEOUT, source)


def from_settings(loaded: LoadedSettings) -> list[McpServerConfig]:
    """The servers the settings files start: the user's, then the project's where trusted (an
    untrusted project's servers are held back by `load_settings`, like its hooks). A project
    server of the same name replaces the user's. `trust_read_only` is the user's word only."""
    servers: dict[str, McpServerConfig] = {}
    for source, settings in (("user", loaded.user), ("project", loaded.project)):
        for name, s in settings.mcp.servers.items():
            servers[name] = _config(name, s, source)  # type: ignore[arg-type]
    user = loaded.user.mcp.servers
    return [c if c.source == "user" or (name in user and user[name].trust_read_only)
            else replace(c, trust_read_only=False) for name, c in servers.items()]
