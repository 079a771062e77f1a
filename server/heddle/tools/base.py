"""What a tool is, what it runs with, and what it returns."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Protocol

import msgspec

from heddle.loop.events import CoreEvent, Preview


class ToolError(Exception):
    """A failure the model should read as an error tool result (not a daemon error)."""


@dataclass(frozen=True)
class ToolOutput:
    content: str
    summary: str
    is_error: bool = False
    diff: str | None = None


@dataclass
class ToolContext:
    workspace: Path
    emit: Callable[[CoreEvent], None] = lambda event: None
    env: dict[str, str] = field(default_factory=dict)
    """Environment for processes tools start (secrets already removed)."""

    def resolve(self, raw: str) -> Path:
        """An absolute, symlink-free path inside the workspace, or ToolError."""
        path = Path(os.path.expanduser(raw))
        if not path.is_absolute():
            path = self.workspace / path
        resolved = path.resolve()
        root = self.workspace.resolve()
        if resolved != root and root not in resolved.parents:
            raise ToolError(f"{raw} is outside the workspace {root}; only files inside it "
                            "can be used")
        return resolved

    def relative(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.workspace.resolve()))
        except ValueError:
            return str(path)


class Tool(Protocol):
    name: ClassVar[str]
    description: ClassVar[str]
    input_type: ClassVar[type[msgspec.Struct]]
    concurrency_safe: ClassVar[bool]
    read_only: ClassVar[bool]
    max_result_chars: ClassVar[int]

    def title(self, inp: Any, ctx: ToolContext) -> str: ...

    def normalise(self, inp: Any, ctx: ToolContext) -> Any:
        """Resolve paths (raises ToolError); the result is what permission rules see."""
        ...

    async def preview(self, inp: Any, ctx: ToolContext) -> Preview | None: ...

    def rule_for(self, inp: Any, ctx: ToolContext) -> str:
        """The rule "allow always" would save for this call."""
        ...

    async def run(self, inp: Any, ctx: ToolContext) -> ToolOutput: ...


def schema_of(tool: Tool) -> dict[str, Any]:
    """The tool's definition as the Messages API takes it."""
    (ref,), components = msgspec.json.schema_components([tool.input_type])
    schema = dict(components[tool.input_type.__name__])
    schema.pop("title", None)
    return {"name": tool.name, "description": tool.description, "input_schema": schema}


def cap(text: str, limit: int) -> str:
    """Keep head and tail of an over-long result, saying how much was left out."""
    if len(text) <= limit:
        return text
    head = text[: limit * 2 // 3]
    tail = text[-(limit // 3):]
    return f"{head}\n\n[... {len(text) - len(head) - len(tail)} characters omitted ...]\n\n{tail}"
