"""Bash: a shell command in its own process group, with a timeout and an output cap.

`open_group` and `reap` are the one way to run a command (Bash here, hooks too): in a session
and process group of its own, registered with the reaper, so the whole group dies however the
command ends — finished, timed out, cancelled, or the daemon killed.
"""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Annotated, ClassVar

import anyio
import msgspec

from heddle.loop.events import CommandPreview
from heddle.permissions.rules import bash_rule_for
from heddle.tools.base import ToolBase, ToolContext, ToolOutput, cap
from heddle.tools.environment import tool_env
from heddle.tools.reaper import REAPER

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


class HeadTail:
    """Keeps the first and the last `keep` bytes of a stream, and how much fell in between."""

    def __init__(self, keep: int):
        self.keep = keep
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = self.keep - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > self.keep:
            self.dropped += len(self.tail) - self.keep
            del self.tail[:len(self.tail) - self.keep]

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        if not self.dropped:
            return head + tail
        return f"{head}\n\n[... {self.dropped} bytes omitted ...]\n\n{tail}"


async def open_group(command: list[str], env: dict[str, str] | None,
                     **kwargs) -> anyio.abc.Process:
    """Start `command` (with `env`; None: the daemon's) as the leader of a new session and
    process group that the reaper kills if the daemon dies; release it with `reap`."""
    REAPER.start()
    process = await anyio.open_process(command, env=REAPER.env(env), start_new_session=True,
                                       **kwargs)
    REAPER.watch(process.pid)
    return process


async def reap(process: anyio.abc.Process) -> None:
    """However a command ended: kill its whole group (the command if it still runs, its stray
    background children if not), then release the process. Shielded, never hangs."""
    if process.returncode is None:
        await kill_group(process)
    else:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    REAPER.forget(process.pid)  # the group is dead: its number may be reused from here on
    with anyio.CancelScope(shield=True), anyio.move_on_after(KILL_GRACE):
        await process.aclose()


class Bash(ToolBase):
    name: ClassVar[str] = "Bash"
    description: ClassVar[str] = (
        "Run a bash command in the workspace folder and return its exit code and combined "
        "stdout/stderr. Long output is cut in the middle. The command is killed with all its "
        "children after `timeout` seconds. Stdin is empty, so interactive commands fail. "
        "Environment variables holding secrets (API keys, tokens) are not passed on. Prefer "
        "Read, Glob, Grep and LS to inspect files, and Edit to change them.")
    input_type = BashInput
    concurrency_safe = False
    read_only = False
    max_result_chars = 30_000

    def title(self, inp: BashInput, ctx: ToolContext) -> str:
        first = inp.command.strip().splitlines()[0] if inp.command.strip() else inp.command
        return f"Run: {first[:120]}"

    def rule_for(self, inp: BashInput, ctx: ToolContext) -> str:
        return bash_rule_for(inp.command)

    async def preview(self, inp: BashInput, ctx: ToolContext) -> CommandPreview:
        return CommandPreview(inp.command, str(ctx.workspace))

    async def run(self, inp: BashInput, ctx: ToolContext) -> ToolOutput:
        process = await open_group(
            ["/bin/bash", "-c", inp.command], cwd=str(ctx.workspace), env=ctx.env or tool_env(),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        output = HeadTail(self.max_result_chars * 2)
        timed_out = False
        try:
            with anyio.move_on_after(inp.timeout) as scope:
                async for chunk in process.stdout:
                    output.add(chunk)
                await process.wait()
            timed_out = scope.cancelled_caught
        finally:
            await reap(process)
        output = cap(output.text(), self.max_result_chars)
        if timed_out:
            return ToolOutput(f"Command timed out after {inp.timeout:g} s and was killed.\n"
                              f"{output}", f"timed out after {inp.timeout:g} s", is_error=True)
        code = process.returncode
        return ToolOutput(f"Exit code {code}\n{output}" if output else f"Exit code {code}",
                          f"exit {code}")
