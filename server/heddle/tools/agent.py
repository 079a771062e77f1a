"""Task: a sub-agent with its own conversation and a read-only tool set.

The sub-agent is a nested loop (source `agent:<name>`) on the same model. It can read and
search but not edit or run commands, so it never asks for permission; its tool calls are shown
to the editor under the Task call; its final answer is the Task's result.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

import msgspec

from heddle.core.tools import ToolContext, ToolError, ToolOutput
from heddle.tools.base import ToolBase

AGENT_TOOLS = ("Read", "Grep", "Glob", "LS")
AGENT_MAX_TURNS = 40


class TaskInput(msgspec.Struct):
    description: Annotated[str, msgspec.Meta(min_length=1, max_length=80, description="A short (3-6 word) label for the task, shown to the user")]
    prompt: Annotated[str, msgspec.Meta(min_length=1, description="The full task for the sub-agent: what to find out and what to report back. It sees nothing of this conversation")]


class Task(ToolBase):
    name: ClassVar[str] = "Task"
    description: ClassVar[str] = (
        "Start a sub-agent for a self-contained research task (finding where something is "
        "defined, surveying how a feature works across files). It can read and search the "
        "workspace but not change it, works in its own context, and answers with a report. "
        "Several Task calls in one response run in parallel.")
    input_type = TaskInput
    concurrency_safe = True
    read_only = True
    max_result_chars = 40_000
    title_template = "Task: {description}"

    async def run(self, inp: TaskInput, ctx: ToolContext) -> ToolOutput:
        if ctx.run_agent is None:
            raise ToolError("a sub-agent cannot start another sub-agent; do the work directly")
        return await ctx.run_agent(inp.description, inp.prompt)
