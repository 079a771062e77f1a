"""What the built-in tools share: the common behaviour behind the `Tool` interface
(`ToolBase`), the schema the model sees, and capping over-long results."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, ClassVar

import msgspec

from heddle.atomic import write_atomic
from heddle.core.events import Preview
from heddle.core.tools import Tool, ToolContext
from heddle.ids import file_stem
from heddle.private import make_dirs


# --- what the built-in tools share -----------------------------------------------------------


class ToolBase:
    """The common behaviour behind the `Tool` interface: a tool sets what differs from it.

    - an input field named `path` is a path: `normalise` resolves it (absolute, symlink-free,
      inside the workspace or ToolError), so a new tool's path is checked without asking for
      it, and the templates see it relative to the workspace. Other inputs are used as given.
    - `title_template`: the call's title, formatted with the input's fields; a permission
      prompt has the same title.
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

    def prompt_title(self, inp: Any, ctx: ToolContext) -> str:
        return self.title(inp, ctx)

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


FILE_PATH: dict[str, str] = {"file_path": "path"}
"""The alias of `path` in the inputs that have one (`heddle.tools.inputs`): the name Claude
models are trained to use."""


def _has_path(inp: msgspec.Struct) -> bool:
    return "path" in inp.__struct_fields__


def schema_of(tool: Tool) -> dict[str, Any]:
    """The tool's definition as the Messages API takes it (built once per tool class: a few
    milliseconds each time otherwise, on every turn). A tool whose schema is not a Struct's
    (an MCP server's) carries its `definition` ready-made."""
    definition = getattr(tool, "definition", None)
    return definition if definition is not None else _schema(type(tool))


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
    # the id is the model endpoint's: one that is no plain name is saved under its hash
    path = folder / f"{file_stem(call_id)}.txt"
    try:
        make_dirs(folder, own_from=folder.parent)
        write_atomic(path, text.encode("utf-8", "replace"), follow_symlinks=False,
                     own=True)
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
