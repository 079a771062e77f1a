"""`heddle acp` driven by the ACP SDK's client side over real stdio, and a recording client."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from acp import spawn_agent_process
from acp.schema import (AllowedOutcome, ClientCapabilities, CreateTerminalResponse,
                        DeniedOutcome, FileSystemCapabilities, InitializeResponse,
                        KillTerminalResponse,
                        ReadTextFileResponse, ReleaseTerminalResponse, RequestPermissionResponse,
                        TerminalExitStatus, TerminalOutputResponse, WaitForTerminalExitResponse,
                        WriteTextFileResponse)

AGENT = [sys.executable, "-I", "-m", "heddle", "acp"]


class Recorder:
    """An ACP client that keeps every update, answers permission requests from `answers`
    (default allow once) and serves files from `buffers` (its unsaved text), else the disk."""

    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []
        self.permissions: list[dict[str, Any]] = []
        self.answers: list[str] = []
        """Option ids to choose, in order; "cancelled" answers cancelled."""
        self.hold: asyncio.Event | None = None
        """Set: permission requests wait for it before they answer."""
        self.asked = asyncio.Event()
        self.buffers: dict[str, str] = {}
        self.reads: list[str] = []
        self.writes: list[tuple[str, str]] = []
        self.terminals: dict[str, dict[str, Any]] = {}
        self.raw: list[dict[str, Any]] = []
        """Every `session/update` as it arrived, before the SDK read it (the SDK's schema
        does not know every update kind: those it does not know reach no handler)."""

    def observe(self, event: Any) -> None:
        """The SDK connection's stream observer."""
        message = event.message
        if event.direction.value == "incoming" and message.get("method") == "session/update":
            self.raw.append(message["params"]["update"])

    def raw_of(self, kind: str) -> list[dict[str, Any]]:
        return [u for u in self.raw if u.get("sessionUpdate") == kind]

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append(update.model_dump(mode="json", by_alias=True, exclude_none=True))

    async def request_permission(self, session_id: str, tool_call: Any, options: list,
                                 **_: Any) -> RequestPermissionResponse:
        self.permissions.append({"toolCall": tool_call.model_dump(mode="json", by_alias=True,
                                                                  exclude_none=True),
                                 "options": [o.option_id for o in options]})
        self.asked.set()
        if self.hold is not None:
            await self.hold.wait()
        answer = self.answers.pop(0) if self.answers else "allow_once"
        if answer == "cancelled":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected",
                                                                option_id=answer))

    async def read_text_file(self, session_id: str, path: str, line=None, limit=None,
                             **_: Any) -> ReadTextFileResponse:
        self.reads.append(path)
        if path in self.buffers:
            return ReadTextFileResponse(content=self.buffers[path])
        return ReadTextFileResponse(content=Path(path).read_text())

    async def write_text_file(self, session_id: str, path: str, content: str,
                              **_: Any) -> WriteTextFileResponse:
        self.writes.append((path, content))
        self.buffers[path] = content
        return WriteTextFileResponse()

    # -- a terminal that runs commands here (when `terminal` is advertised) --------------------
    async def create_terminal(self, session_id: str, command: str, args=None, env=None,
                              cwd=None, output_byte_limit=None, **_: Any):
        proc = await asyncio.create_subprocess_exec(
            command, *(args or []), cwd=cwd, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        tid = f"term-{len(self.terminals)}"
        out = bytearray()

        async def read():
            while chunk := await proc.stdout.read(4096):
                out.extend(chunk)
        self.terminals[tid] = {"proc": proc, "out": out, "reader": asyncio.ensure_future(read()),
                               "released": False, "command": [command, *(args or [])]}
        return CreateTerminalResponse(terminal_id=tid)

    def _status(self, tid: str) -> TerminalExitStatus | None:
        code = self.terminals[tid]["proc"].returncode
        if code is None:
            return None
        return TerminalExitStatus(exit_code=code if code >= 0 else None,
                                  signal=signal.Signals(-code).name if code < 0 else None)

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str, **_: Any):
        t = self.terminals[terminal_id]
        await t["proc"].wait()
        await t["reader"]
        status = self._status(terminal_id)
        return WaitForTerminalExitResponse(exit_code=status.exit_code, signal=status.signal)

    async def terminal_output(self, session_id: str, terminal_id: str, **_: Any):
        t = self.terminals[terminal_id]
        return TerminalOutputResponse(output=t["out"].decode(errors="replace"), truncated=False,
                                      exit_status=self._status(terminal_id))

    async def kill_terminal(self, session_id: str, terminal_id: str, **_: Any):
        proc = self.terminals[terminal_id]["proc"]
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        return KillTerminalResponse()

    async def release_terminal(self, session_id: str, terminal_id: str, **_: Any):
        await self.kill_terminal(session_id, terminal_id)
        self.terminals[terminal_id]["released"] = True
        return ReleaseTerminalResponse()

    # -- what was seen -----------------------------------------------------------------------
    def kinds(self) -> list[str]:
        return [u["sessionUpdate"] for u in self.updates]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [u for u in self.updates if u["sessionUpdate"] == kind]

    def text(self, kind: str = "agent_message_chunk") -> str:
        return "".join(u["content"]["text"] for u in self.of(kind))

    def calls(self) -> dict[str, dict[str, Any]]:
        """Each tool call as its updates leave it (the fields of the latest win)."""
        calls: dict[str, dict[str, Any]] = {}
        for u in self.updates:
            if u["sessionUpdate"] in ("tool_call", "tool_call_update"):
                calls.setdefault(u["toolCallId"], {}).update(u)
        return calls

    async def wait_raw(self, kind: str, count: int = 1, timeout: float = 20) -> None:
        async def poll():
            while len(self.raw_of(kind)) < count:
                await asyncio.sleep(0.01)
        await asyncio.wait_for(poll(), timeout)

    async def wait_for(self, kind: str, count: int = 1, timeout: float = 20) -> None:
        async def poll():
            while self.kinds().count(kind) < count:
                await asyncio.sleep(0.01)
        await asyncio.wait_for(poll(), timeout)


def capabilities(read: bool = False, write: bool = False, terminal: bool = False
                 ) -> ClientCapabilities:
    return ClientCapabilities(fs=FileSystemCapabilities(read_text_file=read,
                                                        write_text_file=write),
                              terminal=terminal)


@asynccontextmanager
async def agent(env: dict[str, str], cwd: Path, client: Recorder | None = None,
                caps: ClientCapabilities | None = None, log: Path | None = None,
                compaction: bool = False):
    """(connection, process, initialize result) of a `heddle acp` started for the test; the
    SDK closes its stdin at the end, then terminates and kills it if it does not exit.
    `compaction`: the client declares `session.compaction: {}`, which the SDK's schema does
    not model yet, so that `initialize` goes out through the SDK connection's own request."""
    client = client or Recorder()
    stderr = open(log, "ab") if log else subprocess.DEVNULL
    try:
        async with spawn_agent_process(client, AGENT[0], *AGENT[1:], env=env, cwd=cwd,
                                       transport_kwargs={"stderr": stderr},
                                       observers=[client.observe]) as (conn, proc):
            caps = caps or capabilities()
            if compaction:
                params = {"protocolVersion": 1, "clientCapabilities": {
                    **caps.model_dump(mode="json", by_alias=True, exclude_none=True),
                    "session": {"compaction": {}}}}
                init = InitializeResponse.model_validate(await asyncio.wait_for(
                    conn._conn.send_request("initialize", params), 30))
            else:
                init = await asyncio.wait_for(conn.initialize(
                    protocol_version=1, client_capabilities=caps), 30)
            yield conn, proc, init
    finally:
        if log:
            stderr.close()
