"""Bash: a shell command in its own process group, with a timeout and an output cap."""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Annotated, ClassVar

import anyio
import msgspec

from heddle.loop.events import CommandPreview
from heddle.tools.base import ToolContext, ToolOutput, cap

DEFAULT_TIMEOUT = 120.0
MAX_TIMEOUT = 600.0
KILL_GRACE = 2.0


class BashInput(msgspec.Struct, forbid_unknown_fields=True):
    command: Annotated[str, msgspec.Meta(min_length=1, description="The shell command to run")]
    timeout: Annotated[float, msgspec.Meta(gt=0, le=MAX_TIMEOUT, description="Seconds before the command is killed (default 120)")] = DEFAULT_TIMEOUT


async def kill_group(process: anyio.abc.Process) -> None:
    """SIGTERM the whole process group, then SIGKILL after a grace period. Never hangs."""
    with anyio.CancelScope(shield=True):
        for sig, wait in ((signal.SIGTERM, KILL_GRACE), (signal.SIGKILL, KILL_GRACE)):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                break
            with anyio.move_on_after(wait):
                await process.wait()
                # the leader is gone; make sure nothing else of its group survives
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                break


class Bash:
    name: ClassVar[str] = "Bash"
    description: ClassVar[str] = (
        "Run a bash command in the workspace folder and return its exit code and combined "
        "stdout/stderr. Long output is cut in the middle. The command is killed with all its "
        "children after `timeout` seconds.")
    input_type = BashInput
    concurrency_safe = False
    read_only = False
    max_result_chars = 30_000

    def normalise(self, inp: BashInput, ctx: ToolContext) -> BashInput:
        return inp

    def title(self, inp: BashInput, ctx: ToolContext) -> str:
        first = inp.command.strip().splitlines()[0] if inp.command.strip() else inp.command
        return f"Run: {first[:120]}"

    def rule_for(self, inp: BashInput, ctx: ToolContext) -> str:
        words = inp.command.split()
        prefix = " ".join(words[:2]) if len(words) > 1 else (words[0] if words else "")
        return f"Bash({prefix}:*)"

    async def preview(self, inp: BashInput, ctx: ToolContext) -> CommandPreview:
        return CommandPreview(inp.command, str(ctx.workspace))

    async def run(self, inp: BashInput, ctx: ToolContext) -> ToolOutput:
        process = await anyio.open_process(
            ["/bin/bash", "-c", inp.command], cwd=str(ctx.workspace), env=ctx.env or None,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True)
        chunks: list[bytes] = []
        size = 0
        timed_out = False
        try:
            with anyio.move_on_after(inp.timeout) as scope:
                async for chunk in process.stdout:
                    if size < self.max_result_chars * 4:
                        chunks.append(chunk)
                    size += len(chunk)
                await process.wait()
            timed_out = scope.cancelled_caught
        finally:
            if process.returncode is None:
                await kill_group(process)
            else:
                try:
                    os.killpg(process.pid, signal.SIGKILL)  # stray background children
                except (ProcessLookupError, PermissionError):
                    pass
            await process.aclose()
        output = cap(b"".join(chunks).decode("utf-8", errors="replace"), self.max_result_chars)
        if timed_out:
            return ToolOutput(f"Command timed out after {inp.timeout:g} s and was killed.\n"
                              f"{output}", f"timed out after {inp.timeout:g} s", is_error=True)
        code = process.returncode
        return ToolOutput(f"Exit code {code}\n{output}" if output else f"Exit code {code}",
                          f"exit {code}")
