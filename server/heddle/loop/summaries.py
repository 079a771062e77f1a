"""Background work that must never delay the loop: one-line summaries of tool batches."""

from __future__ import annotations

import logging
from typing import Awaitable, Callable

import anyio
import anyio.abc
import msgspec

from heddle.core.events import CoreEvent, ToolSummary
from heddle.core.messages import ToolResultBlock, ToolUseBlock, user_text
from heddle.core.stream import ModelCaller, ModelError, ModelRequest, TextChunk

log = logging.getLogger(__name__)

SUMMARY_SYSTEM = ("You label a coding agent's progress. Given tool calls and their results, "
                  "answer with one short line (under 12 words) saying what they accomplished. "
                  "No preamble, no quotes.")


class Background:
    """Tasks started in the turn's task group and cancelled as soon as the query ends."""

    def __init__(self, task_group: anyio.abc.TaskGroup):
        self._tg = task_group
        self._scopes: set[anyio.CancelScope] = set()
        self._closed = False

    def spawn(self, fn: Callable[[], Awaitable[None]]) -> None:
        async def run() -> None:
            if self._closed:
                return
            with anyio.CancelScope() as scope:
                self._scopes.add(scope)
                try:
                    await fn()
                finally:
                    self._scopes.discard(scope)
        self._tg.start_soon(run)

    def close(self) -> None:
        self._closed = True
        for scope in list(self._scopes):
            scope.cancel()


def describe(calls: list[ToolUseBlock], results: tuple[ToolResultBlock, ...]) -> str:
    by_id = {r.tool_use_id: r for r in results}
    lines = []
    for call in calls:
        result = by_id.get(call.id)
        outcome = "(no result)" if result is None else (
            ("error: " if result.is_error else "") + result.text[:300].replace("\n", " "))
        lines.append(f"- {call.name} {msgspec.json.encode(call.input).decode()[:200]} -> {outcome}")
    return "\n".join(lines)


async def summarize_tools(model: ModelCaller, summary_model: str, calls: list[ToolUseBlock],
                          results: tuple[ToolResultBlock, ...],
                          emit: Callable[[CoreEvent], None]) -> None:
    request = ModelRequest(summary_model, SUMMARY_SYSTEM,
                           (user_text(describe(calls, results)),), max_tokens=64)
    parts: list[str] = []
    try:
        async for ev in model.stream(request):
            if isinstance(ev, TextChunk):
                parts.append(ev.text)
    except ModelError as exc:
        log.info("tool summary skipped: %s", exc.info.message)
        return
    text = " ".join("".join(parts).split())
    if text:
        emit(ToolSummary(tuple(c.id for c in calls), text))
