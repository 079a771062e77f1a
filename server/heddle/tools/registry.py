"""The built-in tool set."""

from __future__ import annotations

from heddle.core.tools import Tool
from heddle.tools.agent import Task
from heddle.tools.edits import MultiEdit, Write
from heddle.tools.files import Edit, Read
from heddle.tools.listing import LS, Glob
from heddle.tools.plan import PresentPlan
from heddle.tools.search import Grep
from heddle.tools.shell import Bash
from heddle.tools.todo import TodoWrite


def builtin_tools() -> dict[str, Tool]:
    tools = (Read(), Glob(), Grep(), LS(), Edit(), MultiEdit(), Write(), Bash(), TodoWrite(),
             Task(), PresentPlan())
    return {t.name: t for t in tools}  # tests/unit/test_boot.py checks BUILTIN_TOOL_NAMES
