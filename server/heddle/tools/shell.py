"""Bash: a shell command in its own process group, with a timeout and an output cap.

The command runs through `heddle.processes.groups` (`open_group`, `reap`), as hooks do, so its
whole group dies however it ends. What it writes goes to the editor as it comes
(`ToolContext.output`), and to the model once it ends, cut in the middle if long.
"""

from __future__ import annotations

import signal
import subprocess
from typing import Annotated, ClassVar

import anyio
import msgspec

from heddle.core.events import CommandPreview
from heddle.core.tools import ToolContext, ToolOutput
from heddle.processes.environment import tool_env
from heddle.processes.groups import open_group, reap
from heddle.rules import bash_rule_for
from heddle.tools.base import ToolBase, cap

DEFAULT_TIMEOUT_MS = 120_000
MIN_TIMEOUT_MS = 1_000
MAX_TIMEOUT_MS = 600_000
TITLE_CHARS = 120


class BashInput(msgspec.Struct):
    command: Annotated[str, msgspec.Meta(min_length=1, description="The shell command to run")]
    timeout: Annotated[float, msgspec.Meta(ge=MIN_TIMEOUT_MS, le=MAX_TIMEOUT_MS, description=f"Milliseconds before the command and its children are killed: {MIN_TIMEOUT_MS} to {MAX_TIMEOUT_MS} (10 minutes); default {DEFAULT_TIMEOUT_MS} (2 minutes)")] = DEFAULT_TIMEOUT_MS
    description: Annotated[str | None, msgspec.Meta(description="What the command does, in 5-10 words (Run the unit tests): the call's title for the user")] = None


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


class Bash(ToolBase):
    name: ClassVar[str] = "Bash"
    description: ClassVar[str] = (
        "Run a bash command in the workspace folder and return its exit code and combined "
        "stdout/stderr. Long output is cut in the middle. The command is killed with all its "
        "children after `timeout` milliseconds (default 2 minutes, at most 10). Stdin is "
        "empty, so interactive commands fail. "
        "Environment variables holding secrets (API keys, tokens) are not passed on. Prefer "
        "Read, Glob, Grep and LS to inspect files, and Edit to change them.")
    input_type = BashInput
    concurrency_safe = False
    read_only = False
    max_result_chars = 30_000

    def title(self, inp: BashInput, ctx: ToolContext) -> str:
        label = " ".join((inp.description or "").split())
        return label[:TITLE_CHARS] if label else self.prompt_title(inp, ctx)

    def prompt_title(self, inp: BashInput, ctx: ToolContext) -> str:
        first = inp.command.strip().splitlines()[0] if inp.command.strip() else inp.command
        return f"Run: {first[:TITLE_CHARS]}"

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
            with anyio.move_on_after(inp.timeout / 1000) as scope:
                async for chunk in process.stdout:
                    output.add(chunk)
                    ctx.output("combined", chunk)
                await process.wait()
            timed_out = scope.cancelled_caught
        finally:
            await reap(process)
        output = cap(output.text(), self.max_result_chars)
        code = process.returncode
        exit_code, killed_by = (code, None) if code is None or code >= 0 else (None, _name(-code))
        if timed_out:
            after = _duration(inp.timeout)
            return ToolOutput(f"Command timed out after {after} (timeout {inp.timeout:g} ms) and "
                              f"was killed.\n{output}", f"timed out after {after}",
                              is_error=True, exit_code=exit_code, signal=killed_by)
        summary = f"killed by {killed_by}" if killed_by else f"exit {code}"
        return ToolOutput(f"Exit code {code}\n{output}" if output else f"Exit code {code}",
                          summary, exit_code=exit_code, signal=killed_by)


def _duration(ms: float) -> str:
    return f"{ms / 1000:g} s" if ms < 60_000 else f"{ms / 60_000:g} min"


def _name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
