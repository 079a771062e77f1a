"""What a tool is, what it runs with, and what it returns."""

from __future__ import annotations

import contextvars
import functools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Awaitable, Any, Callable, ClassVar, Protocol

import msgspec

from heddle.loop.events import CoreEvent, Preview


CURRENT_CALL: contextvars.ContextVar[str] = contextvars.ContextVar("heddle_tool_call", default="")
"""The id of the tool call the current task runs (set by the executor)."""


class ToolError(Exception):
    """A failure the model should read as an error tool result (not a daemon error)."""


@dataclass(frozen=True)
class ToolOutput:
    content: str
    summary: str
    is_error: bool = False
    diff: str | None = None


class EditorBuffers(Protocol):
    """What the editor holds open (LSP document sync)."""

    def unsaved(self, path: Path) -> bool:
        """Whether the editor's text of `path` differs from the file on disk."""
        ...


def _nowhere_else(tool: str, path: Path) -> bool:
    return False


@dataclass
class ToolContext:
    workspace: Path
    emit: Callable[[CoreEvent], None] = lambda event: None
    env: dict[str, str] = field(default_factory=dict)
    """Environment for processes tools start (secrets already removed)."""
    session_id: str = ""
    documents: EditorBuffers | None = None
    """The editor's open documents; None: the client does not sync documents."""
    outside_allowed: Callable[[str, Path], bool] = _nowhere_else
    """Whether a permission rule lets tool `name` use `path` outside the workspace."""
    results_dir: Path | None = None
    """Where this session's over-long tool results are saved in full; Read may read what is in
    it, though it is outside the workspace. None: not saved."""
    run_agent: Callable[..., Awaitable[ToolOutput]] | None = None
    """Runs a sub-agent: `await run_agent(name, prompt, tool_call_id)`. None inside sub-agents
    (they cannot start their own)."""

    def resolve(self, raw: str, tool: str = "") -> Path:
        """An absolute, symlink-free path inside the workspace (or one a rule allows `tool` to
        use), else ToolError."""
        if "\0" in raw:  # the OS refuses such a path; say so instead of failing inside the tool
            raise ToolError(f"{raw!r} cannot be used: a path cannot contain a NUL character")
        path = Path(os.path.expanduser(raw))
        if not path.is_absolute():
            path = self.workspace / path
        try:
            resolved = path.resolve()
        except (RuntimeError, OSError):  # RuntimeError: Python < 3.13's "Symlink loop from"
            raise ToolError(f"{raw} cannot be used: its symbolic links form a loop") from None
        root = self.workspace.resolve()
        # this session's saved results only: not other sessions', not their transcripts
        saved = (tool == "Read" and self.results_dir is not None
                 and self.results_dir.resolve() in resolved.parents)
        if resolved != root and root not in resolved.parents and not saved \
                and not self.outside_allowed(tool, resolved):
            raise ToolError(f"{raw} is outside the workspace {root}; only files inside it "
                            "can be used (a permission rule in the user's settings can allow "
                            "other paths)")
        return resolved

    def relative(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.workspace.resolve()))
        except ValueError:
            return str(path)

    def check_unsaved(self, path: Path) -> None:
        """ToolError if the editor holds unsaved changes to `path` (they would be clobbered)."""
        if self.documents is not None and self.documents.unsaved(path):
            raise ToolError(f"{self.relative(path)} has unsaved changes in the editor, so it was "
                            "not changed: writing it would overwrite them. Ask the user to save "
                            "or discard their changes, then read the file again and retry.")


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


# --- what the built-in tools share -----------------------------------------------------------


class ToolBase:
    """The common behaviour behind the `Tool` interface: a tool sets what differs from it.

    - an input field named `path` is a path: `normalise` resolves it (absolute, symlink-free,
      inside the workspace or ToolError), so a new tool's path is checked without asking for
      it, and the templates see it relative to the workspace. Other inputs are used as given.
    - `title_template`: the call's title, formatted with the input's fields.
    - `rule_template`: the rule "allow always" saves, formatted likewise; None: the tool's
      name, a rule for every call of it.
    - no preview.
    """

    name: ClassVar[str]
    title_template: ClassVar[str]
    rule_template: ClassVar[str | None] = None

    def normalise(self, inp: Any, ctx: ToolContext) -> Any:
        if not _has_path(inp):
            return inp
        return msgspec.structs.replace(inp, path=str(ctx.resolve(inp.path, self.name)))

    def title(self, inp: Any, ctx: ToolContext) -> str:
        return self.title_template.format_map(self._fields(inp, ctx))

    def rule_for(self, inp: Any, ctx: ToolContext) -> str:
        if self.rule_template is None:
            return self.name
        return self.rule_template.format_map(self._fields(inp, ctx))

    async def preview(self, inp: Any, ctx: ToolContext) -> Preview | None:
        return None

    def _fields(self, inp: Any, ctx: ToolContext) -> dict[str, Any]:
        # format_map reads the values as data: a `{` in a pattern or a path stays as it is
        fields = msgspec.structs.asdict(inp)
        if _has_path(inp):
            fields["path"] = ctx.relative(Path(inp.path))
        return fields


def _has_path(inp: msgspec.Struct) -> bool:
    return "path" in inp.__struct_fields__


def schema_of(tool: Tool) -> dict[str, Any]:
    """The tool's definition as the Messages API takes it (built once per tool class: a few
    milliseconds each time otherwise, on every turn)."""
    return _schema(type(tool))


@functools.lru_cache(maxsize=None)
def _schema(tool: type) -> dict[str, Any]:
    (ref,), components = msgspec.json.schema_components([tool.input_type])
    schema = dict(components[tool.input_type.__name__])
    schema.pop("title", None)
    return {"name": tool.name, "description": tool.description, "input_schema": schema}


def budget_result(text: str, limit: int, folder: Path | None, call_id: str) -> str:
    """Layer 0 of the context pipeline: an over-long result keeps its head and tail, and its
    full text is saved to a file the model can page through with Read."""
    short = cap(text, limit)
    if folder is None:
        return short
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{call_id}.txt"
        path.write_text(text, encoding="utf-8")
    except OSError:
        return short
    return (f"{short}\n\n[The full result ({len(text):,} characters) is saved in {path}; "
            "read it with Read, using offset and limit, if you need the omitted part.]")


def cap(text: str, limit: int) -> str:
    """Keep head and tail of an over-long result, saying how much was left out."""
    if len(text) <= limit:
        return text
    head = text[: limit * 2 // 3]
    tail = text[-(limit // 3):]
    return f"{head}\n\n[... {len(text) - len(head) - len(tail)} characters omitted ...]\n\n{tail}"
