"""What plan mode refuses, and what the refusal tells the model.

Plan mode runs read-only tools and read-only Bash command lines (`heddle.permissions.readonly`)
and refuses the rest. `PresentPlan` (`heddle.tools.plan`) is offered in every mode, so that the
tool list (the start of the cached prompt) is the same whatever the mode; outside plan mode its
calls are refused with `not_planning`.
"""

from __future__ import annotations

from typing import Any

from heddle.core.tools import Tool
from heddle.permissions.readonly import NAMES, refusal
from heddle.rules import PLAN_TOOL

__all__ = ["PLAN_TOOL", "not_planning", "plan_refusal"]


def not_planning(mode: str) -> str:
    return (f"{PLAN_TOOL} only works in plan mode, and this session is in mode {mode}: there "
            "is no plan to approve. Go ahead with the work as the mode allows (or ask the user "
            "in your answer if you want their view first).")


def plan_refusal(tool: Tool, inp: Any) -> str | None:
    """Why plan mode refuses this call (of a tool that is not read-only); None: a Bash command
    line that only reads, which plan mode lets run."""
    if tool.name == "Bash" and isinstance(command := getattr(inp, "command", None), str):
        why = refusal(command)
        if why is None:
            return None
        return (f"This command is not available in plan mode: {why}. Only read-only command "
                f"lines run while planning (each command one of {', '.join(NAMES)}, "
                "git only to read, no redirection to a file). Describe the change in your plan "
                "instead, or use Read, Grep, Glob or LS.")
    return (f"{tool.name} is not available in plan mode: only read-only tools and read-only "
            "commands run. Describe the change you would make in your plan instead, and "
            f"present the plan with {PLAN_TOOL}.")
