"""File tools: Read and Edit, and what the editing tools share."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Annotated, ClassVar, Iterable, Literal

import anyio
import msgspec

from heddle.regular import NotRegularFile, open_regular
from heddle.core.events import DiffPreview
from heddle.core.hunks import Review
from heddle.core.tools import ToolContext, ToolError, ToolOutput
from heddle.tools.base import FILE_PATH, ToolBase
from heddle.tools.landing import diff_preview, land, land_reviewed, start, unified_diff
from heddle.tools.reads import Hashing, fingerprint, remember, unread_note
from heddle.words import plural

MAX_LINE_CHARS = 2000
SNIFF_BYTES = 8192


class ReadInput(msgspec.Struct):
    aliases: ClassVar[dict[str, str]] = FILE_PATH
    path: Annotated[str, msgspec.Meta(description="File to read, absolute or relative to the workspace")]
    offset: Annotated[int, msgspec.Meta(ge=1, description="First line to read (1-based)")] = 1
    limit: Annotated[int, msgspec.Meta(ge=1, le=5000, description="Number of lines")] = 2000


class Read(ToolBase):
    name: ClassVar[str] = "Read"
    description: ClassVar[str] = (
        "Read a text file. Returns lines prefixed with their line numbers (`   12\\tcode`); "
        "the numbers are not part of the file. Large files come in pages: the result ends "
        "with the offset to read on from. Lines over 2000 characters are cut. Binary files "
        "are refused. Read a file before you Edit it.")
    input_type = ReadInput
    concurrency_safe = True
    read_only = True
    max_result_chars = 100_000
    title_template = "Read {path}"
    rule_template = "Read({path})"

    async def run(self, inp: ReadInput, ctx: ToolContext) -> ToolOutput:
        out, print_, source = await anyio.to_thread.run_sync(self._read, inp, ctx)
        remember(ctx, Path(inp.path), print_, source, "read")  # a part read counts as read
        return out

    def _read(self, inp: ReadInput, ctx: ToolContext
              ) -> tuple[ToolOutput, str, Literal["disk", "editor"]]:
        """The lines, and the fingerprint and source of the whole text they were taken from."""
        path = Path(inp.path)
        buffer = ctx.documents.buffer(path) if ctx.documents is not None else None
        if buffer is not None:  # the editor's text is what the user sees, saved or not
            note = (f"The editor has unsaved changes to {ctx.relative(path)}; this is the "
                    "editor's text, not the file on disk.\n" if ctx.documents.unsaved(path)
                    else "")
            out = self._lines(inp, io.StringIO(buffer.text, newline="\n"), note)
            return out, fingerprint(buffer.text), "editor"
        if path.is_dir():
            raise ToolError(f"{inp.path} is a folder, not a file; use LS to list it")
        try:
            file = open_regular(path, buffering=0)  # never a pipe or a device: they block
        except FileNotFoundError:
            raise ToolError(f"{inp.path} does not exist") from None
        except NotRegularFile as exc:
            raise ToolError(f"cannot read {exc}; Read shows files only") from None
        except OSError as exc:
            raise ToolError(f"cannot read {inp.path}: {exc.strerror}") from None
        hashing = Hashing(file)  # _lines reads to the end: the fingerprint is of all of it
        with io.BufferedReader(hashing, 1 << 16) as raw:
            if b"\0" in raw.peek(SNIFF_BYTES)[:SNIFF_BYTES]:
                raise ToolError(f"{inp.path} is a binary file ({os.fstat(raw.fileno()).st_size} "
                                "bytes); Read shows text files only")
            out = self._lines(inp, io.TextIOWrapper(raw, "utf-8", "replace", "\n"))
            return out, hashing.hash.hexdigest(), "disk"

    def _lines(self, inp: ReadInput, lines: Iterable[str], note: str = "") -> ToolOutput:
        budget = self.max_result_chars - 500
        out: list[str] = []
        size = total = 0
        end = inp.offset + inp.limit
        for total, line in enumerate(lines, 1):
            if total < inp.offset or total >= end or size > budget:
                continue
            line = line.rstrip("\r\n")
            if len(line) > MAX_LINE_CHARS:
                line = f"{line[:MAX_LINE_CHARS]} [... {len(line) - MAX_LINE_CHARS} more characters]"
            out.append(f"{total:>6}\t{line}")
            size += len(out[-1]) + 1
        if total == 0:
            return ToolOutput(f"{note}(the file is empty)", "empty file")
        if not out:
            raise ToolError(f"offset {inp.offset} is past the end of the file ({total} lines)")
        shown_to = inp.offset + len(out) - 1
        if shown_to < total:
            out.append(f"\n(lines {inp.offset}-{shown_to} of {total}; "
                       f"read on with offset={shown_to + 1})")
        return ToolOutput(note + "\n".join(out), plural(shown_to - inp.offset + 1, "line"))


class EditInput(msgspec.Struct):
    aliases: ClassVar[dict[str, str]] = FILE_PATH
    path: Annotated[str, msgspec.Meta(description="File to edit, absolute or relative to the workspace")]
    old_string: Annotated[str, msgspec.Meta(description="Exact text to replace; must be unique unless replace_all. Empty to create a new file")]
    new_string: Annotated[str, msgspec.Meta(description="Replacement text")]
    replace_all: bool = False


def replace_text(text: str, old: str, new: str, replace_all: bool, where: str) -> tuple[str, int]:
    """`text` with `old` replaced: it must occur exactly once unless `replace_all`."""
    if old == new:
        raise ToolError("old_string and new_string are the same; nothing to change")
    if "\r\n" in text and "\r\n" not in old:  # the model sees and writes \n line endings
        old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
    count = text.count(old)
    if count == 0:
        raise ToolError(f"old_string was not found in {where}; read the file and copy the text "
                        "exactly, whitespace included")
    if count > 1 and not replace_all:
        raise ToolError(f"old_string occurs {count} times in {where}; include more surrounding "
                        "text to make it unique, or set replace_all")
    return text.replace(old, new), count


class Edit(ToolBase):
    name: ClassVar[str] = "Edit"
    description: ClassVar[str] = (
        "Replace exact text in a file. old_string must match the file exactly (whitespace "
        "included, without Read's line-number prefixes) and occur once, unless replace_all is "
        "true. With an empty old_string and a path that does not exist, creates the file with "
        "new_string. A file open in the editor is edited there, unsaved changes kept (or, if "
        "the editor cannot apply edits, refused while it has unsaved changes).")
    input_type = EditInput
    concurrency_safe = False
    read_only = False
    max_result_chars = 20_000
    title_template = "Edit {path}"
    rule_template = "Edit({path})"

    def _apply(self, inp: EditInput, before: str | None) -> tuple[str, str, int]:
        if before is None:
            if inp.old_string == "":
                return "", inp.new_string, 1
            raise ToolError(f"{inp.path} does not exist (use an empty old_string to create it)")
        if inp.old_string == "":
            raise ToolError(f"{inp.path} already exists; old_string must not be empty")
        after, count = replace_text(before, inp.old_string, inp.new_string, inp.replace_all,
                                    inp.path)
        return before, after, count

    async def preview(self, inp: EditInput, ctx: ToolContext) -> DiffPreview | None:
        cur, _ = await anyio.to_thread.run_sync(start, ctx, Path(inp.path), self.name)
        before, after, _ = self._apply(inp, cur.text)
        return await diff_preview(ctx, Path(inp.path), before, after)

    async def run(self, inp: EditInput, ctx: ToolContext) -> ToolOutput:
        path = Path(inp.path)
        cur, known = await anyio.to_thread.run_sync(start, ctx, path, self.name)
        before, after, count = self._apply(inp, cur.text)
        problems = await land(ctx, path, cur, after, self.name)
        rel = ctx.relative(path)
        noun = "replacement" if count == 1 else "replacements"
        created = not before and inp.old_string == ""
        summary = "created" if created else f"{count} {noun}"
        text = f"Created {rel}." if created else f"Edited {rel} ({summary})."
        if not known:
            text += unread_note(ctx, path)
        return ToolOutput(text + problems, summary, diff=unified_diff(rel, before, after))

    async def run_reviewed(self, inp: EditInput, ctx: ToolContext, review: Review) -> ToolOutput:
        return await land_reviewed(ctx, Path(inp.path), review, self.name)
