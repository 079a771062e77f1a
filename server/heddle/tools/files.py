"""File tools: Read and Edit."""

from __future__ import annotations

import difflib
import os
import tempfile
from pathlib import Path
from typing import Annotated, ClassVar

import anyio
import msgspec

from heddle.loop.events import DiffPreview
from heddle.tools.base import ToolContext, ToolError, ToolOutput

MAX_LINE_CHARS = 2000


class ReadInput(msgspec.Struct, forbid_unknown_fields=True):
    path: Annotated[str, msgspec.Meta(description="File to read, absolute or relative to the workspace")]
    offset: Annotated[int, msgspec.Meta(ge=1, description="First line to read (1-based)")] = 1
    limit: Annotated[int, msgspec.Meta(ge=1, le=5000, description="Number of lines")] = 2000


class Read:
    name: ClassVar[str] = "Read"
    description: ClassVar[str] = (
        "Read a text file. Returns lines prefixed with their line numbers (`   12\\tcode`). "
        "Use offset and limit to page through large files. Binary files are refused.")
    input_type = ReadInput
    concurrency_safe = True
    read_only = True
    max_result_chars = 100_000

    def normalise(self, inp: ReadInput, ctx: ToolContext) -> ReadInput:
        return msgspec.structs.replace(inp, path=str(ctx.resolve(inp.path)))

    def title(self, inp: ReadInput, ctx: ToolContext) -> str:
        return f"Read {ctx.relative(Path(inp.path))}"

    def rule_for(self, inp: ReadInput, ctx: ToolContext) -> str:
        return f"Read({ctx.relative(Path(inp.path))})"

    async def preview(self, inp, ctx):
        return None

    async def run(self, inp: ReadInput, ctx: ToolContext) -> ToolOutput:
        return await anyio.to_thread.run_sync(self._read, inp, ctx)

    def _read(self, inp: ReadInput, ctx: ToolContext) -> ToolOutput:
        path = Path(inp.path)
        if path.is_dir():
            raise ToolError(f"{inp.path} is a directory, not a file")
        try:
            with path.open("rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise ToolError(f"{inp.path} does not exist") from None
        except OSError as exc:
            raise ToolError(f"cannot read {inp.path}: {exc.strerror}") from None
        if b"\0" in data[:8192]:
            raise ToolError(f"{inp.path} is a binary file ({len(data)} bytes); Read shows text only")
        lines = data.decode("utf-8", errors="replace").splitlines()
        if not lines:
            return ToolOutput("(the file is empty)", "empty file")
        start = inp.offset - 1
        if start >= len(lines):
            raise ToolError(f"offset {inp.offset} is past the end of the file ({len(lines)} lines)")
        chunk = lines[start:start + inp.limit]
        out = [f"{n:>6}\t{line[:MAX_LINE_CHARS]}" for n, line in enumerate(chunk, start + 1)]
        shown_to = start + len(chunk)
        if shown_to < len(lines):
            out.append(f"\n(lines {inp.offset}-{shown_to} of {len(lines)}; "
                       f"read on with offset={shown_to + 1})")
        return ToolOutput("\n".join(out), f"{len(chunk)} lines")


class EditInput(msgspec.Struct, forbid_unknown_fields=True):
    path: Annotated[str, msgspec.Meta(description="File to edit, absolute or relative to the workspace")]
    old_string: Annotated[str, msgspec.Meta(description="Exact text to replace; must be unique unless replace_all. Empty to create a new file")]
    new_string: Annotated[str, msgspec.Meta(description="Replacement text")]
    replace_all: bool = False


def unified_diff(path: str, before: str, after: str) -> str:
    return "".join(difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True),
        fromfile=f"a/{path}", tofile=f"b/{path}"))


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


class Edit:
    name: ClassVar[str] = "Edit"
    description: ClassVar[str] = (
        "Replace exact text in a file. old_string must match the file exactly (whitespace "
        "included) and occur once, unless replace_all is true. With an empty old_string and a "
        "path that does not exist, creates the file with new_string.")
    input_type = EditInput
    concurrency_safe = False
    read_only = False
    max_result_chars = 20_000

    def normalise(self, inp: EditInput, ctx: ToolContext) -> EditInput:
        return msgspec.structs.replace(inp, path=str(ctx.resolve(inp.path)))

    def title(self, inp: EditInput, ctx: ToolContext) -> str:
        return f"Edit {ctx.relative(Path(inp.path))}"

    def rule_for(self, inp: EditInput, ctx: ToolContext) -> str:
        return f"Edit({ctx.relative(Path(inp.path))})"

    def _apply(self, inp: EditInput) -> tuple[str, str, int]:
        path = Path(inp.path)
        if not path.exists():
            if inp.old_string == "":
                return "", inp.new_string, 1
            raise ToolError(f"{inp.path} does not exist (use an empty old_string to create it)")
        before = path.read_text(encoding="utf-8")
        if inp.old_string == "":
            raise ToolError(f"{inp.path} already exists; old_string must not be empty")
        if inp.old_string == inp.new_string:
            raise ToolError("old_string and new_string are the same; nothing to change")
        count = before.count(inp.old_string)
        if count == 0:
            raise ToolError(f"old_string was not found in {inp.path}; read the file and copy "
                            "the text exactly")
        if count > 1 and not inp.replace_all:
            raise ToolError(f"old_string occurs {count} times in {inp.path}; include more "
                            "surrounding text to make it unique, or set replace_all")
        return before, before.replace(inp.old_string, inp.new_string), count

    async def preview(self, inp: EditInput, ctx: ToolContext) -> DiffPreview | None:
        before, after, _ = await anyio.to_thread.run_sync(self._apply, inp)
        rel = ctx.relative(Path(inp.path))
        return DiffPreview(inp.path, unified_diff(rel, before, after))

    async def run(self, inp: EditInput, ctx: ToolContext) -> ToolOutput:
        def edit() -> ToolOutput:
            before, after, count = self._apply(inp)
            write_atomic(Path(inp.path), after)
            rel = ctx.relative(Path(inp.path))
            noun = "replacement" if count == 1 else "replacements"
            created = not before and inp.old_string == ""
            summary = "created" if created else f"{count} {noun}"
            return ToolOutput(f"{'Created' if created else 'Edited'} {rel} ({summary}).",
                              summary, diff=unified_diff(rel, before, after))
        return await anyio.to_thread.run_sync(edit)
