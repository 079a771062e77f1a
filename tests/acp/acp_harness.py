"""`heddle acp` driven by the ACP SDK's client side over real stdio, and a recording client."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from acp import spawn_agent_process
from acp.schema import (AllowedOutcome, ClientCapabilities, DeniedOutcome,
                        FileSystemCapabilities, ReadTextFileResponse, RequestPermissionResponse,
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

    async def wait_for(self, kind: str, count: int = 1, timeout: float = 20) -> None:
        async def poll():
            while self.kinds().count(kind) < count:
                await asyncio.sleep(0.01)
        await asyncio.wait_for(poll(), timeout)


def capabilities(read: bool = False, write: bool = False) -> ClientCapabilities:
    return ClientCapabilities(fs=FileSystemCapabilities(read_text_file=read,
                                                        write_text_file=write))


@asynccontextmanager
async def agent(env: dict[str, str], cwd: Path, client: Recorder | None = None,
                caps: ClientCapabilities | None = None, log: Path | None = None):
    """(connection, process, initialize result) of a `heddle acp` started for the test; the
    SDK closes its stdin at the end, then terminates and kills it if it does not exit."""
    client = client or Recorder()
    stderr = open(log, "ab") if log else subprocess.DEVNULL
    try:
        async with spawn_agent_process(client, AGENT[0], *AGENT[1:], env=env, cwd=cwd,
                                       transport_kwargs={"stderr": stderr}) as (conn, proc):
            init = await asyncio.wait_for(conn.initialize(
                protocol_version=1, client_capabilities=caps or capabilities()), 30)
            yield conn, proc, init
    finally:
        if log:
            stderr.close()
