"""Runs the tool calls of one model response, starting safe ones while the model still streams.

Order of work for one call: validate input → normalise → permission decision (ask the editor
if needed) → run. Concurrency-safe calls start as soon as their block is complete, unless an
unsafe call came before them; unsafe calls wait for the response to end and run one at a time.
Results are returned in request order, and every call gets one, cancelled or not.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import msgspec

from heddle.loop.events import PermissionAnswered, PermissionAsked, ToolCallFinished
from heddle.loop.messages import ToolResultBlock, ToolUseBlock
from heddle.permissions.policy import (Allow, Asker, Deny, PermissionPolicy,
                                       PermissionPrompt)
from heddle.tools.base import Tool, ToolContext, ToolError, cap

log = logging.getLogger(__name__)


@dataclass
class _Call:
    block: ToolUseBlock
    input_error: str | None
    tool: Tool | None
    result: ToolResultBlock | None = None
    started: bool = False

    @property
    def safe(self) -> bool:
        return self.tool is not None and self.tool.concurrency_safe


@dataclass
class ToolExecutor:
    tools: dict[str, Tool]
    ctx: ToolContext
    policy: PermissionPolicy
    asker: Asker
    task_group: anyio.abc.TaskGroup
    permission_lock: anyio.Lock = field(default_factory=anyio.Lock)
    calls: list[_Call] = field(default_factory=list)
    _queued: list[_Call] = field(default_factory=list)
    _running: int = 0
    _idle: anyio.Event = field(default_factory=anyio.Event)
    _done: anyio.Event = field(default_factory=anyio.Event)

    def __post_init__(self) -> None:
        self._idle.set()

    def add(self, block: ToolUseBlock, input_error: str | None = None) -> None:
        """A tool_use block is complete in the stream."""
        call = _Call(block, input_error, self.tools.get(block.name))
        self.calls.append(call)
        if call.safe and not self._queued:
            self._start(call)
        else:
            self._queued.append(call)

    def finish_intake(self) -> None:
        """The response has ended: run what is queued, in order."""
        self.task_group.start_soon(self._drain_queue)

    async def wait(self) -> None:
        await self._done.wait()

    def results(self, missing: str) -> tuple[ToolResultBlock, ...]:
        """One result per call in request order; calls without one get `missing` as an error."""
        return tuple(c.result or ToolResultBlock(c.block.id, missing, True) for c in self.calls)

    def _start(self, call: _Call) -> None:
        call.started = True
        self._running += 1
        self._idle = anyio.Event() if self._running == 1 else self._idle
        self.task_group.start_soon(self._run, call)

    async def _drain_queue(self) -> None:
        for call in self._queued:
            if call.safe:
                self._start(call)
                continue
            await self._idle.wait()
            self._start(call)
            await self._idle.wait()
        await self._idle.wait()
        self._done.set()

    async def _run(self, call: _Call) -> None:
        try:
            status, content, summary, diff = await self._execute(call)
        except anyio.get_cancelled_exc_class():
            self._finish(call, "cancelled", "The tool call was cancelled by the user before "
                         "it finished; its effect is unknown.", "cancelled")
            raise
        except Exception as exc:  # a bug in a tool must not end the turn
            log.exception("tool %s failed", call.block.name)
            self._finish(call, "error", f"{call.block.name} failed: {type(exc).__name__}: {exc}",
                         f"failed: {exc}")
        else:
            self._finish(call, status, content, summary, diff)
        finally:
            self._running -= 1
            if self._running == 0:
                self._idle.set()

    def _finish(self, call: _Call, status: str, content: str, summary: str,
                diff: str | None = None) -> None:
        limit = call.tool.max_result_chars if call.tool else 10_000
        call.result = ToolResultBlock(call.block.id, cap(content, limit) or "(no output)",
                                      status != "ok")
        self.ctx.emit(ToolCallFinished(call.block.id, call.block.name, status, summary, diff))

    async def _execute(self, call: _Call) -> tuple[str, str, str, str | None]:
        block, tool = call.block, call.tool
        if tool is None:
            names = ", ".join(sorted(self.tools))
            return "error", f"There is no tool named {block.name}. Tools: {names}.", "unknown tool", None
        if call.input_error:
            return "error", f"The input for {tool.name} was not valid JSON: {call.input_error}", "invalid input", None
        try:
            inp = msgspec.convert(block.input, tool.input_type)
        except msgspec.ValidationError as exc:
            return "error", f"Invalid input for {tool.name}: {exc}", f"invalid input: {exc}", None
        try:
            inp = tool.normalise(inp, self.ctx)
            decision = self.policy.decide(tool, inp, self.ctx)
            if isinstance(decision, Deny):
                self.ctx.emit(PermissionAnswered(block.id, "reject", reason=decision.message))
                return "rejected", decision.message, "denied", None
            if not isinstance(decision, Allow):
                rejected = await self._ask(block, tool, inp, decision.rule)
                if rejected is not None:
                    return "rejected", rejected, "rejected", None
            output = await tool.run(inp, self.ctx)
        except ToolError as exc:
            return "error", str(exc), str(exc), None
        return ("error" if output.is_error else "ok"), output.content, output.summary, output.diff

    async def _ask(self, block: ToolUseBlock, tool: Tool, inp: Any, rule: str) -> str | None:
        """Ask the editor; None when allowed, else the message for the model."""
        async with self.permission_lock:  # one prompt at a time per session
            preview = await tool.preview(inp, self.ctx)
            title = tool.title(inp, self.ctx)
            self.ctx.emit(PermissionAsked(block.id, title, preview))
            answer = await self.asker(PermissionPrompt(
                block.id, tool.name, msgspec.to_builtins(inp), title, preview, rule))
            saved = (answer.rule or rule) if answer.decision == "allowAlways" else None
            self.ctx.emit(PermissionAnswered(block.id, answer.decision, saved, answer.reason))
        if answer.decision == "allowAlways":
            self.policy.allow.append(saved)
            return None
        if answer.decision == "allowOnce":
            return None
        if answer.message:
            return f"The user rejected this {tool.name} call and said: {answer.message}"
        return (f"The user rejected this {tool.name} call"
                + (f" ({answer.reason})." if answer.reason else ".")
                + " Do not retry it; ask the user how to proceed if you need it.")
