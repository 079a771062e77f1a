"""A session's MCP servers: started together, each restarted a bounded number of times after it
dies, all stopped with the session.

`start_servers` is what a front door calls when it makes a session: it starts every server at
once and waits until all are ready or `startup` seconds have passed, whichever comes first, so
a slow server delays a session's first model call by that bound at most. A server that becomes
ready later offers its tools from the session's next turn on (a turn's tools are fixed when it
starts; changing them between turns costs one prompt-cache write, see docs/mcp.md).

The SDK (`heddle.mcp.client`) is imported only here, when a session has a server to start:
sessions without MCP servers never pay for it.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Sequence

import anyio

from heddle.core.tools import Tool, ToolError
from heddle.mcp.config import McpServerConfig
from heddle.mcp.values import CONNECT_TIMEOUT, CallResult, RemoteTool

__all__ = ["CallResult", "McpServers", "RemoteTool", "Server", "ServerStatus", "start_servers"]

log = logging.getLogger(__name__)

STARTUP_BOUND = 5.0
"""Seconds a new session waits for its servers (the settings' `mcp.startup_timeout`)."""
MAX_RESTARTS = 3
"""Restarts of a server that died, per session; then it stays failed."""
RESTART_DELAY = 0.5
"""Seconds before a restart (doubled for each later one)."""
STOP_BOUND = 6.0
"""Seconds stopping a session's servers may take (a stdio server gets SIGTERM, then SIGKILL)."""

State = Literal["starting", "ready", "restarting", "failed", "stopped"]


@dataclass(frozen=True)
class ServerStatus:
    """What a client is told of one server: its state, its tools, why it failed."""

    name: str
    transport: str
    source: str
    state: State
    tools: tuple[str, ...]
    """The names the model sees (`mcp__<server>__<tool>`)."""
    error: str | None = None
    restarts: int = 0


@dataclass
class Server:
    """One server of a session: its configuration, its connection while it runs."""

    config: McpServerConfig
    workspace: Path
    state: State = "starting"
    error: str | None = None
    restarts: int = 0
    listed: tuple[RemoteTool, ...] | None = None
    """The tools of its first listing: the ones offered all session long (a restarted server's
    new listing does not change what the model sees)."""
    connection: Any = None
    """`heddle.mcp.client.Connection` while it is ready."""
    ready: anyio.Event = field(default_factory=anyio.Event)
    """Set when its state changes from starting or restarting (ready or failed)."""

    async def call(self, tool: str, arguments: dict[str, Any]) -> CallResult:
        """Call `tool`; ToolError when the server is not running, dies meanwhile, fails the
        call or takes longer than its timeout."""
        name = self.config.name
        if self.state in ("starting", "restarting"):
            with anyio.move_on_after(CONNECT_TIMEOUT):
                await self.ready.wait()
        connection = self.connection
        if self.state != "ready" or connection is None:
            why = f": {self.error}" if self.error else ""
            raise ToolError(f"The MCP server {name} is not running ({self.state}{why}), so "
                            f"{tool} could not be called.")
        return await connection.call(tool, arguments, self.config.timeout)

    async def run(self, client: Any) -> None:
        """Connect (with `client`, the module `heddle.mcp.client`), and reconnect after the
        server dies, up to MAX_RESTARTS times."""
        while True:
            try:
                async with client.connect(self.config, self.workspace) as connection:
                    if self.listed is None:
                        self.listed = connection.tools
                    self.connection, self.state, self.error = connection, "ready", None
                    self._changed()
                    log.info("MCP server %s ready: %d tools", self.config.name,
                             len(connection.tools))
                    self.error = await connection.lost()
            except Exception as exc:  # a server's failure is the server's state, never ours
                self.error = client.describe(exc)
            finally:
                self.connection = None
            log.warning("MCP server %s stopped: %s", self.config.name, self.error)
            if self.restarts >= MAX_RESTARTS:
                self.state = "failed"
                self.error = f"{self.error} (restarted {self.restarts} times; not again)" \
                    if self.restarts else self.error
                self._changed()
                return
            self.state = "restarting"
            if self.ready.is_set():  # calls meanwhile wait for the restart
                self.ready = anyio.Event()
            await anyio.sleep(RESTART_DELAY * 2 ** self.restarts)
            self.restarts += 1

    def _changed(self) -> None:
        self.ready.set()

    def status(self, tools: Sequence[str]) -> ServerStatus:
        return ServerStatus(self.config.name, self.config.transport, self.config.source,
                            self.state, tuple(tools), self.error, self.restarts)


class McpServers:
    """The MCP servers of one session. Their connections live in a task of their own (the
    SDK's transports must be entered and left in one task), which `close` ends."""

    def __init__(self, configs: Sequence[McpServerConfig], workspace: Path) -> None:
        self.servers: list[Server] = []
        self.problems: list[str] = []
        """Servers that could not be started as configured, one line each."""
        seen: set[str] = set()
        for config in configs:
            if config.name in seen:
                self.problems.append(f"MCP server {config.name} is configured twice; the "
                                     "first is used")
                continue
            seen.add(config.name)
            server = Server(config, workspace)
            if problem := config.problem():  # listed as failed, saying why; never started
                self.problems.append(problem)
                server.state, server.error = "failed", problem
                server.ready.set()
            self.servers.append(server)
        self._closing = anyio.Event()
        self._task: asyncio.Task | None = None
        self._tools: dict[str, Tool] | None = None
        self._named: set[str] = set()

    def start(self) -> None:
        if self._task is None and any(s.state == "starting" for s in self.servers):
            self._task = asyncio.get_running_loop().create_task(self._main())

    async def _main(self) -> None:
        try:
            client = await import_client()
        except ImportError as exc:  # an install without the SDK: the servers say so
            for server in self.servers:
                if server.state == "starting":
                    server.state, server.error = "failed", f"the mcp SDK cannot be imported: {exc}"
                    server.ready.set()
            return
        async with anyio.create_task_group() as tg:
            for server in self.servers:
                if server.state == "starting":
                    tg.start_soon(server.run, client)
            await self._closing.wait()
            tg.cancel_scope.cancel()  # each connection's exit stops its server

    async def wait_ready(self, bound: float) -> None:
        """Until every server is ready or failed, or `bound` seconds have passed."""
        with anyio.move_on_after(bound):
            for server in self.servers:
                await server.ready.wait()

    def tools(self) -> dict[str, Tool]:
        """The tools of the servers that listed theirs, in a stable order (by name), each
        definition built once: a turn's tools are byte-identical to the last turn's unless a
        server joined."""
        from heddle.mcp.tools import tools_of

        if self._tools is None or any(s.listed is not None and s.config.name not in self._named
                                      for s in self.servers):
            listed = [s for s in self.servers if s.listed is not None]
            self._named = {s.config.name for s in listed}
            self._tools = tools_of(listed)
        return self._tools

    def status(self) -> list[ServerStatus]:
        tools = self.tools()
        return [s.status([n for n, t in tools.items() if getattr(t, "server", None) is s])
                for s in self.servers]

    async def close(self) -> None:
        """Stop every server (a stdio server's whole process group) and wait for it, within
        STOP_BOUND; the reaper kills whatever a stuck stop left behind at the daemon's exit."""
        self._closing.set()
        task, self._task = self._task, None
        for server in self.servers:
            server.state = "stopped"
        if task is not None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(STOP_BOUND) as scope:
                await asyncio.wait({task})
            if scope.cancelled_caught:
                log.warning("MCP servers did not stop within %g s", STOP_BOUND)
                task.cancel()


async def import_client() -> Any:
    """`heddle.mcp.client`, imported on a worker thread: the SDK is about 0.8 s of CPU, which
    would stall every other session's stream on the event loop. Only a session with servers
    gets here."""
    return await anyio.to_thread.run_sync(importlib.import_module, "heddle.mcp.client")


async def start_servers(configs: Sequence[McpServerConfig], workspace: Path,
                        startup: float = STARTUP_BOUND) -> McpServers:
    """The seam both front doors use: start a session's servers (from its settings and from
    its client) in parallel and wait for them `startup` seconds at most. Keep the result as
    `Session.mcp`; the session's turns offer its tools, and closing the session stops it."""
    servers = McpServers(configs, workspace)
    for problem in servers.problems:
        log.warning("%s", problem)
    servers.start()
    await servers.wait_ready(startup)
    return servers
