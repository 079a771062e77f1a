"""Write (a whole file) and MultiEdit (several exact replacements in one file, all or nothing)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, ClassVar

import anyio
import msgspec

from heddle.core.events import DiffPreview
from heddle.core.hunks import Review
from heddle.core.tools import ToolContext, ToolError, ToolOutput
from heddle.tools.files import replace_text
from heddle.tools.base import FILE_PATH, ToolBase
from heddle.tools.landing import diff_preview, land, land_reviewed, start, unified_diff
from heddle.tools.reads import unread_note


def _lines(text: str) -> str:
    n = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    return f"{n} line{'s' if n != 1 else ''}"


class WriteInput(msgspec.Struct):
    aliases: ClassVar[dict[str, str]] = FILE_PATH
    path: Annotated[str, msgspec.Meta(description="File to write, absolute or relative to the workspace; missing folders are created")]
    content: Annotated[str, msgspec.Meta(description="The complete new content of the file")]


class Write(ToolBase):
    name: ClassVar[str] = "Write"
    description: ClassVar[str] = (
        "Create a file, or replace a file's whole content. Prefer Edit or MultiEdit to change "
        "part of an existing file. A file open in the editor is replaced there (or, if the "
        "editor cannot apply edits, refused while it has unsaved changes).")
    input_type = WriteInput
    concurrency_safe = False
    read_only = False
    max_result_chars = 20_000
    title_template = "Write {path}"
    rule_template = "Edit({path})"

    async def preview(self, inp: WriteInput, ctx: ToolContext) -> DiffPreview:
        cur, _ = await anyio.to_thread.run_sync(start, ctx, Path(inp.path), self.name)
        return await diff_preview(ctx, Path(inp.path), cur.text or "", inp.content)

    async def run(self, inp: WriteInput, ctx: ToolContext) -> ToolOutput:
        path = Path(inp.path)
        cur, _ = await anyio.to_thread.run_sync(start, ctx, path, self.name)
        before, rel = cur.text, ctx.relative(path)
        if before == inp.content:
            return ToolOutput(f"{rel} already has this content; nothing changed.", "unchanged")
        problems = await land(ctx, path, cur, inp.content, self.name)
        verb = "Created" if before is None else "Wrote"
        summary = f"{'created' if before is None else 'wrote'} {_lines(inp.content)}"
        return ToolOutput(f"{verb} {rel} ({_lines(inp.content)}).{problems}", summary,
                          diff=unified_diff(rel, before or "", inp.content))

    async def run_reviewed(self, inp: WriteInput, ctx: ToolContext, review: Review) -> ToolOutput:
        return await land_reviewed(ctx, Path(inp.path), review, self.name)


class EditOperation(msgspec.Struct):
    old_string: Annotated[str, msgspec.Meta(description="Exact text to replace, as the file reads after the previous edits")]
    new_string: Annotated[str, msgspec.Meta(description="Replacement text")]
    replace_all: Annotated[bool, msgspec.Meta(description="Replace every occurrence")] = False


class MultiEditInput(msgspec.Struct):
    aliases: ClassVar[dict[str, str]] = FILE_PATH
    path: Annotated[str, msgspec.Meta(description="File to edit, absolute or relative to the workspace")]
    edits: Annotated[list[EditOperation], msgspec.Meta(min_length=1, description="Applied in order, each to the result of the previous one")]


class MultiEdit(ToolBase):
    name: ClassVar[str] = "MultiEdit"
    description: ClassVar[str] = (
        "Make several exact replacements in one file at once. Edits apply in order, each to "
        "the text the previous one produced, with Edit's rules (unique old_string unless "
        "replace_all). All or nothing: if any edit fails, the file is left unchanged. To create "
        "a file, give a path that does not exist and an empty old_string in the first edit.")
    input_type = MultiEditInput
    concurrency_safe = False
    read_only = False
    max_result_chars = 20_000
    rule_template = "Edit({path})"

    def title(self, inp: MultiEditInput, ctx: ToolContext) -> str:
        n = len(inp.edits)
        return f"Edit {ctx.relative(Path(inp.path))} ({n} change{'s' if n != 1 else ''})"

    def _apply(self, inp: MultiEditInput, before: str | None) -> tuple[str | None, str, int]:
        edits = list(enumerate(inp.edits))
        if before is None:
            if inp.edits[0].old_string != "":
                raise ToolError(f"{inp.path} does not exist (to create it, make the first "
                                "edit's old_string empty)")
            text, count = inp.edits[0].new_string, 1
            edits = edits[1:]
        else:
            text, count = before, 0
        for i, op in edits:
            if op.old_string == "":
                raise ToolError(f"edits[{i}]: old_string is empty; only the first edit of a new "
                                "file may be. Nothing was changed.")
            try:
                text, n = replace_text(text, op.old_string, op.new_string, op.replace_all,
                                       f"{inp.path} (after the edits before it)" if i else inp.path)
            except ToolError as exc:
                raise ToolError(f"edits[{i}]: {exc}. Nothing was changed: MultiEdit applies all "
                                "edits or none.") from None
            count += n
        return before, text, count

    async def preview(self, inp: MultiEditInput, ctx: ToolContext) -> DiffPreview:
        cur, _ = await anyio.to_thread.run_sync(start, ctx, Path(inp.path), self.name)
        before, after, _ = self._apply(inp, cur.text)
        return await diff_preview(ctx, Path(inp.path), before or "", after)

    async def run(self, inp: MultiEditInput, ctx: ToolContext) -> ToolOutput:
        path = Path(inp.path)
        cur, known = await anyio.to_thread.run_sync(start, ctx, path, self.name)
        before, after, count = self._apply(inp, cur.text)
        problems = await land(ctx, path, cur, after, self.name)
        rel = ctx.relative(path)
        summary = "created" if before is None else f"{count} replacement{'s' if count != 1 else ''}"
        text = (f"{'Created' if before is None else 'Edited'} {rel} ({summary} from "
                f"{len(inp.edits)} edits).") + ("" if known else unread_note(ctx, path))
        return ToolOutput(text + problems, summary, diff=unified_diff(rel, before or "", after))

    async def run_reviewed(self, inp: MultiEditInput, ctx: ToolContext,
                           review: Review) -> ToolOutput:
        return await land_reviewed(ctx, Path(inp.path), review, self.name)
