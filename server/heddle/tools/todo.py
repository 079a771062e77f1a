"""TodoWrite: the agent's plan for the turn, streamed to the editor as a `todo` event."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

import msgspec

from heddle.core.events import TodoItem, TodoUpdate
from heddle.core.tools import ToolContext, ToolOutput
from heddle.tools.base import ToolBase


class TodoInput(msgspec.Struct):
    aliases: ClassVar[dict[str, str]] = {"activeForm": "active_form"}
    content: Annotated[str, msgspec.Meta(min_length=1, description="The task, imperative: Run the tests")]
    status: Literal["pending", "in_progress", "completed"]
    active_form: Annotated[str | None, msgspec.Meta(description="The task while it runs: Running the tests")] = None


class TodoWriteInput(msgspec.Struct):
    todos: Annotated[list[TodoInput], msgspec.Meta(description="The whole plan; replaces the previous one")]


class TodoWrite(ToolBase):
    name: ClassVar[str] = "TodoWrite"
    description: ClassVar[str] = (
        "Keep a visible plan for multi-step work: send the whole list each time, with each "
        "task pending, in_progress or completed. Have one task in_progress at a time and mark "
        "tasks completed as soon as they are done. The user sees the plan in the editor. Skip "
        "it for simple one-step requests.")
    input_type = TodoWriteInput
    concurrency_safe = False  # successive plans must arrive in order
    read_only = True
    max_result_chars = 5_000

    def title(self, inp: TodoWriteInput, ctx: ToolContext) -> str:
        return f"Update the plan ({len(inp.todos)} tasks)"

    async def run(self, inp: TodoWriteInput, ctx: ToolContext) -> ToolOutput:
        todos = tuple(TodoItem(t.content, t.status, t.active_form) for t in inp.todos)
        ctx.emit(TodoUpdate(todos))
        count = {s: sum(t.status == s for t in todos) for s in ("completed", "in_progress", "pending")}
        note = ("" if count["in_progress"] <= 1
                else " Keep only one task in_progress at a time.")
        return ToolOutput(
            f"The plan is updated: {len(todos)} tasks, {count['completed']} completed, "
            f"{count['in_progress']} in progress, {count['pending']} pending.{note}",
            f"{count['completed']}/{len(todos)} done")
