"""The daemon as the child of a terminal command (`heddle ask`, `heddle sessions`): started,
initialized and stopped, and what to say when it stops without answering.

It runs in a session of its own, so a Ctrl-C at the terminal reaches the command only, which
decides what the daemon is told. It logs to its log file; what it writes to stderr is kept,
to be shown only when it stops without saying why.
"""

from __future__ import annotations

import asyncio
import collections
import os
import shlex
from typing import Any

from heddle.client import Connection, RpcError
from heddle.launch import python_command
from heddle.terminal import clean

SHUTDOWN_TIMEOUT = 5.0
INITIALIZE_TIMEOUT = 60.0
"""Seconds a daemon may take to answer `initialize` (it answers in about a second; a busy
machine, many times that)."""
STDERR_LINES = 20
"""Lines of the daemon's stderr kept, to show if it stops without saying why."""


def command(daemon: str | None = None) -> list[str]:
    """The command line that starts the daemon: `daemon` split as a shell would, else this
    heddle's `serve`, isolated from the folder it runs in."""
    return shlex.split(daemon) if daemon else python_command("heddle", "serve")


class StderrTail:
    """The last lines the daemon wrote to stderr (read all along, so it never blocks)."""

    def __init__(self, stream: asyncio.StreamReader):
        self.lines: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        self.task = asyncio.ensure_future(self._read(stream))

    async def _read(self, stream: asyncio.StreamReader) -> None:
        try:
            while line := await stream.readline():
                self.lines.append(line.decode(errors="replace").rstrip())
        except (ValueError, ConnectionError):  # a line past the stream's limit: stop keeping
            pass


class Daemon:
    """A started daemon: the connection to it, its stderr, and the errors it announced with
    `window/showMessage` (type 1: why it cannot start, say)."""

    def __init__(self, proc: asyncio.subprocess.Process):
        self.proc = proc
        self.conn = Connection(proc.stdout, proc.stdin)
        self.stderr = StderrTail(proc.stderr)
        self.errors: list[str] = []
        self.conn.on_notification("window/showMessage", self.announced)  # a client may widen it

    @classmethod
    async def start(cls, argv: list[str], env: dict[str, str]) -> Daemon:
        """Start `argv` with `env` (logging warnings only, unless it says otherwise); OSError
        if it cannot be started (`cannot_start` says it)."""
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env={"HEDDLE_LOG_LEVEL": "WARNING", **env},
            limit=64 * 1024 * 1024, start_new_session=True)
        return cls(proc)

    async def initialize(self, client: str, capabilities: dict[str, Any] | None = None,
                         timeout: float = INITIALIZE_TIMEOUT) -> None:
        """`initialize` and `initialized`, as `client`. A daemon that does not answer within
        `timeout` is killed, and ConnectionError raised (`lost` says why)."""
        try:
            await asyncio.wait_for(self.conn.request("initialize", {
                "processId": os.getpid(), "rootUri": None, "clientInfo": {"name": client},
                "capabilities": capabilities or {}}), timeout)
        except asyncio.TimeoutError:
            self.errors.append(f"the daemon did not answer `initialize` within {timeout:g} s, "
                               "so it was stopped (its log may say why)")
            self.kill()
            raise ConnectionError("no answer to initialize") from None
        self.conn.notify("initialized", {})

    def announced(self, params: dict[str, Any]) -> None:
        """A `window/showMessage`: an error is kept, for `refused` and `lost` to say."""
        if params.get("type") == 1:
            self.errors.append(str(params.get("message")))

    def refused(self, exc: RpcError) -> str:
        """What to say about a request the daemon refused: why it said it cannot go on, if it
        did, else the refusal."""
        return f"heddle: {clean(self.errors[-1] if self.errors else exc.message)}"

    async def lost(self) -> list[str]:
        """What to say once the connection closed before an answer: the error the daemon
        announced, else its exit code and the last lines of its stderr."""
        try:
            await asyncio.wait_for(asyncio.shield(self.stderr.task), SHUTDOWN_TIMEOUT)
            await asyncio.wait_for(self.proc.wait(), SHUTDOWN_TIMEOUT)
        except asyncio.TimeoutError:
            pass
        if self.errors:
            return [f"heddle: {clean(self.errors[-1])}"]
        return [f"heddle: the daemon stopped unexpectedly (exit code {self.proc.returncode})"
                + (":" if self.stderr.lines else "")] + [
            f"  {clean(line)}" for line in self.stderr.lines]

    async def stop(self) -> None:
        """`shutdown` and `exit`, each waited for a bounded time; then it is killed if it
        still runs."""
        try:
            if self.proc.returncode is None:
                await asyncio.wait_for(self.conn.request("shutdown"), SHUTDOWN_TIMEOUT)
                self.conn.notify("exit")
                await asyncio.wait_for(self.proc.wait(), SHUTDOWN_TIMEOUT)
        except (asyncio.TimeoutError, RpcError, ConnectionError):
            pass
        finally:
            self.kill()
            await self.proc.wait()
            self.stderr.task.cancel()

    def kill(self) -> None:
        """Kill it at once, if it still runs (its reaper kills the tool processes)."""
        if self.proc.returncode is None:
            self.proc.kill()


def cannot_start(argv: list[str], exc: OSError) -> str:
    return f"heddle: cannot start the daemon ({argv[0]}): {exc.strerror or exc}"
