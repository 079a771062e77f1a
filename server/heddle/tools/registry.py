"""The built-in tool set."""

from __future__ import annotations

from heddle.tools.base import Tool
from heddle.tools.files import Edit, Read
from heddle.tools.search import Grep
from heddle.tools.shell import Bash


def builtin_tools() -> dict[str, Tool]:
    return {t.name: t for t in (Read(), Grep(), Edit(), Bash())}
