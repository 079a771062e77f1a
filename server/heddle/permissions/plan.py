"""What plan mode refuses, and what the refusal tells the model.

Plan mode runs read-only tools and read-only Bash command lines (`heddle.permissions.readonly`)
and refuses the rest. `PresentPlan` (`heddle.tools.plan`) is offered in every mode, so that the
tool list (the start of the cached prompt) is the same whatever the mode; outside plan mode its
calls are refused with `not_planning`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from heddle.commands import analyse
from heddle.core.tools import Tool
from heddle.permissions.gitconfig import runs_programs
from heddle.permissions.readonly import NAMES, refusal
from heddle.rules import PLAN_TOOL

__all__ = ["PLAN_TOOL", "not_planning", "plan_refusal"]


def not_planning(mode: str) -> str:
    return (f"{PLAN_TOOL} only works in plan mode, and this session is in mode {mode}: there "
            "is no plan to approve. Go ahead with the work as the mode allows (or ask the user "
            "in your answer if you want their view first).")


def plan_refusal(tool: Tool, inp: Any, workspace: Path) -> str | None:
    """Why plan mode refuses this call (of a tool that is not read-only); None: a Bash command
    line that only reads, which plan mode lets run."""
    if tool.name == "Bash" and isinstance(command := getattr(inp, "command", None), str):
        why = refusal(command) or git_refusal(command, workspace)
        if why is None:
            return None
        return (f"This command is not available in plan mode: {why}. Only read-only command "
                f"lines run while planning (each command one of {', '.join(NAMES)}, "
                "git only to read, no redirection to a file). Describe the change in your plan "
                "instead, or use Read, Grep, Glob or LS.")
    return (f"{tool.name} is not available in plan mode: only read-only tools and read-only "
            "commands run. Describe the change you would make in your plan instead, and "
            f"present the plan with {PLAN_TOOL}.")


def git_refusal(command: str, workspace: Path) -> str | None:
    """Why the git commands of a read-only command line may not run unasked: the repository
    they run in names programs for git to run (`heddle.permissions.gitconfig`). Each `git -C`
    folder is checked; after a `cd` the folder is not known, so git is not run."""
    commands = analyse(command).commands
    gits = [c.plain for c in commands if c.plain and c.plain[0] == "git"]
    if not gits:
        return None
    if any(c.plain and c.plain[0] == "cd" for c in commands):
        return "git runs after a cd here: run it from the workspace, with git -C FOLDER"
    for words in gits:
        folder = workspace
        for i, word in enumerate(words[:-1]):
            if word == "-C":
                folder = folder / words[i + 1]
        if (why := runs_programs(folder)) is not None:
            return f"git does not run unasked in this repository: {why}"
    return None
