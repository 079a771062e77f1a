"""Bash in the client's terminal (ACP `terminal/*`), for a client that advertised `terminal`.

The command runs where the client runs it (Zed: a terminal embedded in the tool call, which
the user watches live), so Heddle's process groups, reaper and secret stripping do not apply:
it sees the client's environment. The call is the same Bash to the model and to the
permission rules (`Bash(npm test:*)` and the rest); only `run` differs. The timeout kills
the command; a cancel releases the terminal, which kills it (every wait is bounded).
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, ClassVar

import anyio

from heddle.core.tools import CURRENT_CALL, ToolContext, ToolOutput
from heddle.tools.shell import Bash, BashInput

OUTPUT_LIMIT = 256 * 1024
"""Bytes of output the client keeps (it drops the oldest beyond that)."""
CLEANUP = 5.0
"""Seconds releasing a terminal may take after a cancel."""

Request = Callable[[str, dict[str, Any]], Awaitable[Any]]


class ClientTerminalBash(Bash):
    description: ClassVar[str] = (
        "Run a bash command in the workspace folder, in the user's editor terminal, and "
        "return its exit code and output. Long output is cut. The command is killed after "
        "`timeout` seconds. Stdin is empty, so interactive commands fail. Prefer Read, Glob, "
        "Grep and LS to inspect files, and Edit to change them.")

    def __init__(self, request: Request, shown: Callable[[str, str, str], None]):
        self._request = request
        self._shown = shown
        """(session id, tool call id, terminal id): embed the terminal in the call."""

    async def run(self, inp: BashInput, ctx: ToolContext) -> ToolOutput:
        sid = ctx.session_id
        created = await self._request("terminal/create", {
            "sessionId": sid, "command": "/bin/bash", "args": ["-c", inp.command],
            "cwd": str(ctx.workspace), "outputByteLimit": OUTPUT_LIMIT})
        tid = {"sessionId": sid, "terminalId": created["terminalId"]}
        self._shown(sid, CURRENT_CALL.get(), created["terminalId"])
        try:
            with anyio.move_on_after(inp.timeout) as scope:
                await self._request("terminal/wait_for_exit", tid)
            if scope.cancelled_caught:
                await self._request("terminal/kill", tid)
            out = await self._request("terminal/output", tid)
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(CLEANUP):
                await self._request("terminal/release", tid)
        status = out.get("exitStatus") or {}
        code, killed_by = status.get("exitCode"), status.get("signal")
        text = out.get("output", "")
        if out.get("truncated"):
            text = f"[... the beginning of the output was cut ...]\n{text}"
        text = text[-self.max_result_chars:]
        if scope.cancelled_caught:
            return ToolOutput(f"Command timed out after {inp.timeout:g} s and was killed.\n"
                              f"{text}", f"timed out after {inp.timeout:g} s", is_error=True,
                              exit_code=code, signal=killed_by)
        summary = f"killed by {killed_by}" if killed_by else f"exit {code}"
        return ToolOutput(f"Exit code {code}\n{text}" if text else f"Exit code {code}", summary,
                          exit_code=code, signal=killed_by)
