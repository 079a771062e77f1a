"""A session's MCP servers: started together, each restarted a bounded number of times after it
dies, all stopped with the session.

`start_servers` is what a front door calls when it makes a session: it starts every server at
once and waits until all are ready or `startup` seconds have passed, whichever comes first, so
a slow server delays a session's first model call by that bound at most. A server that becomes
ready later offers its tools from the session's next turn on (a turn's tools are fixed when it
starts; changing them between turns costs one prompt-cache write, see docs/mcp.md).

Once the front door has told its client how the servers were at the start, it `watch`es them:
from then on every change — a server that died and is restarted, one that is running again or
became ready late, one that failed for good — reaches it as a `ServerChange`, with the last
lines of the server's stderr, at once (a stdio server's process is watched, so a death while
the session is idle is reported then, not at the next call).

The SDK (`heddle.mcp.client`) is imported only here, when a session has a server to start:
sessions without MCP servers never pay for it.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Sequence

import anyio

from heddle.core.tools import Tool, ToolError
from heddle.mcp.config import McpServerConfig
from heddle.mcp.values import CONNECT_TIMEOUT, CallResult, Ending, RemoteTool

__all__ = ["CallResult", "McpServers", "RemoteTool", "Server", "ServerChange", "ServerStatus",
           "start_servers"]

log = logging.getLogger(__name__)

STARTUP_BOUND = 5.0
"""Seconds a new session waits for its servers (the settings' `mcp.startup_timeout`)."""
MAX_RESTARTS = 3
"""Restarts of a server that died, per session; then it stays failed."""
RESTART_DELAY = 0.5
"""Seconds before the first restart; each later one waits twice as long as the one before."""
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


@dataclass(frozen=True)
class ServerChange:
    """A server's state changed after the session's start: what its client is told."""

    status: ServerStatus
    message: str
    """One line for the user."""
    stderr: tuple[str, ...] = ()
    """The last lines of its stderr when it stopped (secrets masked); () when it is running."""
    restart_in: float | None = None
    """Seconds until it is restarted (state `restarting`)."""


def restart_delay(restarts: int) -> float:
    """Seconds to wait before the restart that follows `restarts` earlier ones."""
    return RESTART_DELAY * 2 ** restarts


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
    ending: Ending | None = None
    """How it last stopped."""
    report: Callable[[Server, float | None], None] | None = None
    """Told of each change of state, and the delay before a restart (`McpServers`)."""

    async def call(self, tool: str, arguments: dict[str, Any]) -> CallResult:
        """Call `tool`; ToolError when the server is not running, dies meanwhile, fails the
        call or takes longer than its timeout."""
        name = self.config.name
        if self.state in ("starting", "restarting"):
            with anyio.move_on_after(CONNECT_TIMEOUT):
                await self.ready.wait()
        connection = self.connection
        if self.state == "failed":
            raise ToolError(f"The MCP server {name} has failed: {self.error}. So {tool} could "
                            "not be called, and the server's tools stay unavailable in this "
                            "session.")
        if self.state != "ready" or connection is None:
            why = f": {self.error}" if self.error else ""
            raise ToolError(f"The MCP server {name} is not running ({self.state}{why}), so "
                            f"{tool} could not be called.")
        return await connection.call(tool, arguments, self.config.timeout)

    async def run(self, client: Any) -> None:
        """Connect (with `client`, the module `heddle.mcp.client`), and reconnect after the
        server dies, up to MAX_RESTARTS times, each restart waiting twice as long as the last."""
        while True:
            try:
                async with client.connect(self.config, self.workspace) as connection:
                    if self.listed is None:
                        self.listed = connection.tools
                    self.connection, self.state, self.error = connection, "ready", None
                    self.settle()
                    log.info("MCP server %s ready: %d tools", self.config.name,
                             len(connection.tools))
                    ending = await connection.lost()
            except Exception as exc:  # a server's failure is the server's state, never ours
                ending = client.ending(exc)
            finally:
                self.connection = None
            if self.state == "stopped":  # its session is closing: nothing to report
                return
            self.ending, self.error = ending, ending.line()
            log.warning("MCP server %s stopped: %s", self.config.name, self.error)
            if self.restarts >= MAX_RESTARTS:
                self.state = "failed"
                if self.restarts:
                    self.error += f" (restarted {self.restarts} times; not again)"
                self.settle()
                return
            self.state = "restarting"
            if self.ready.is_set():  # calls meanwhile wait for the restart
                self.ready = anyio.Event()
            delay = restart_delay(self.restarts)
            self._report(delay)
            await anyio.sleep(delay)
            self.restarts += 1

    def settle(self) -> None:
        self.ready.set()
        self._report(None)

    def _report(self, delay: float | None) -> None:
        if self.report is not None:
            self.report(self, delay)

    def change(self, status: ServerStatus, delay: float | None) -> ServerChange:
        """This server's present state as a change to tell the user of."""
        name, how = self.config.name, self.ending.how if self.ending else "?"
        stderr = self.ending.stderr if self.ending and self.state != "ready" else ()
        if self.state == "restarting":
            message = (f"MCP server {name} stopped ({how}); restarting it in {delay:g} s "
                       f"(restart {self.restarts + 1} of {MAX_RESTARTS}).")
        elif self.state == "ready":
            message = (f"MCP server {name} is running again (restart {self.restarts} of "
                       f"{MAX_RESTARTS})." if self.restarts else
                       f"MCP server {name} is ready; its tools are offered from the next turn.")
        else:
            tries = (f" and was restarted {self.restarts} time{'' if self.restarts == 1 else 's'}"
                     if self.restarts else "")
            then = ("calls to its tools fail until the session is closed and loaded again"
                    if self.listed is not None else "its tools are not offered in this session")
            message = (f"MCP server {name} failed ({how}){tries}; it is not restarted again, "
                       f"so {then}.")
        return ServerChange(status, message, stderr, delay)

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
        self._watcher: Callable[[ServerChange], None] | None = None
        for server in self.servers:
            server.report = self._report

    def watch(self, watcher: Callable[[ServerChange], None]) -> None:
        """Tell `watcher` of every change from now on (the front door's client was told of the
        state until now: call this right after taking `status()` for it, with no await
        between)."""
        self._watcher = watcher

    def _report(self, server: Server, delay: float | None) -> None:
        if self._watcher is None:
            return
        try:  # all of it: a fault in telling must not pass for the server's own failure
            tools = self.tools()
            status = server.status([n for n, t in tools.items()
                                    if getattr(t, "server", None) is server])
            self._watcher(server.change(status, delay))
        except Exception:  # a client gone, say: the server goes on all the same
            log.exception("telling the client of MCP server %s failed", server.config.name)

    def start(self) -> None:
        if self._task is None and any(s.state == "starting" for s in self.servers):
            self._task = asyncio.get_running_loop().create_task(self._main())

    async def _main(self) -> None:
        try:
            client = await import_client()
        except ImportError as exc:  # an install without the SDK: the servers say so
            for server in self.servers:
                if server.state == "starting":
                    server.ending = Ending(f"the mcp SDK cannot be imported: {exc}")
                    server.state, server.error = "failed", server.ending.line()
                    server.settle()
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
        self._watcher = None
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
