"""Where an edit starts from and where it lands.

An open document is edited in the editor when the client can apply edits: the new text is
computed from the buffer and sent as `workspace/applyEdit` at the buffer's version, so unsaved
work is kept and the disk is left to the editor. Otherwise the file on disk is read and
written, and a document with unsaved changes is refused (writing would clobber them).
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from pathlib import Path

import anyio

from heddle.atomic import write_atomic
from heddle.core.events import DiffPreview
from heddle.core.hunks import Review, describe, reviewable, split
from heddle.core.tools import Buffer, ToolContext, ToolError, ToolOutput
from heddle.regular import NotRegularFile, read_regular
from heddle.tools import diagnostics
from heddle.tools.reads import check, fingerprint, remember


def unified_diff(path: str, before: str, after: str) -> str:
    return "".join(difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True),
        fromfile=f"a/{path}", tofile=f"b/{path}"))


def read_text(path: Path) -> str | None:
    """The file's text exactly as stored (line endings kept); None if it does not exist."""
    try:
        data = read_regular(path)
    except FileNotFoundError:
        return None
    except NotRegularFile as exc:
        raise ToolError(str(exc)) from None
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{path} is not a UTF-8 text file; it can only be changed with "
                        "Bash") from None


@dataclass(frozen=True)
class Current:
    text: str | None
    """None: the file does not exist (and is not open)."""
    buffer: Buffer | None = None
    """Set: the edit goes through the editor, to this buffer."""


def current(ctx: ToolContext, path: Path) -> Current:
    """The text an edit of `path` starts from (reads the disk: call it in a thread)."""
    docs = ctx.documents
    if docs is not None and docs.editor is not None and (buf := docs.buffer(path)) is not None:
        # an empty buffer of a file that is not on disk yet is a file to create
        return Current(buf.text if buf.text or os.path.lexists(path) else None, buf)
    ctx.check_unsaved(path)
    return Current(read_text(path))


def start(ctx: ToolContext, path: Path, tool: str) -> tuple[Current, bool]:
    """The text an edit of `path` by `tool` starts from, and whether the agent knew it;
    ToolError if it changed since the agent saw it (`reads.check`). Reads the disk."""
    cur = current(ctx, path)
    return cur, check(ctx, path, cur.text, cur.buffer is not None, tool)


async def diff_preview(ctx: ToolContext, path: Path, before: str, after: str) -> DiffPreview:
    """The permission preview of changing `path` from `before` to `after` (diffing a large
    file takes a while: not on the event loop)."""
    def preview() -> DiffPreview:
        diff = unified_diff(ctx.relative(path), before, after)
        if not reviewable(before, after):
            return DiffPreview(str(path), diff)
        return DiffPreview(str(path), diff, before, after, split(before, after))
    return await anyio.to_thread.run_sync(preview)


async def land(ctx: ToolContext, path: Path, cur: Current, new_text: str, tool: str) -> str:
    """Write `new_text`: through the editor for an open document, else to disk. The agent
    knows the file as `new_text` after. Returns what to add to the result: the editor's new
    errors and warnings in the document, if any."""
    rel = ctx.relative(path)
    if cur.buffer is None:
        await anyio.to_thread.run_sync(lambda: write_atomic(path, new_text, follow_symlinks=False,
                                                            private=False))
        remember(ctx, path, fingerprint(new_text), "disk", "edit")
        return ""
    editor = ctx.documents.editor if ctx.documents is not None else None
    baseline = await diagnostics.before_edit(ctx, cur.buffer) if editor is not None else None
    reason = ("the editor can no longer apply edits" if editor is None
              else await editor.apply(cur.buffer, new_text, f"Heddle: {tool} {rel}"))
    if reason is not None:
        raise ToolError(f"The editor did not apply the edit to {rel}: {reason}. Read the file "
                        "again before editing it.")
    remember(ctx, path, fingerprint(new_text), "editor", "edit")
    return await diagnostics.after_edit(ctx, baseline, new_text, rel)


async def land_reviewed(ctx: ToolContext, path: Path, review: Review, tool: str) -> ToolOutput:
    """Write what the user chose instead of the proposal, if the file is still as they saw it."""
    rel = ctx.relative(path)
    cur = await anyio.to_thread.run_sync(current, ctx, path)
    if (cur.text or "") != review.before:
        raise ToolError(f"{rel} changed while the user was reviewing the edit, so nothing was "
                        "written. Read it again and redo the edit.")
    problems = await land(ctx, path, cur, review.written, tool)
    if review.edited:
        summary = "the user's own version"
    else:
        taken = sum(d.decision == "accept" for d in review.decisions)
        summary = f"{taken} of {len(review.hunks)} hunks"
    content, diff = await anyio.to_thread.run_sync(
        lambda: (describe(rel, review), unified_diff(rel, review.before, review.written)))
    return ToolOutput(content + problems, summary, diff=diff)
