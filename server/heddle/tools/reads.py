"""What the agent has seen of each file, and the rule that keeps its edits from overwriting
changes it has not seen.

Read records the fingerprint of the whole text it read (from disk, or the editor's buffer of
an open document), even when it showed only part of it; Edit, MultiEdit and Write record the
text they wrote. An edit starts from the text `landing.current` gives (the buffer when it goes
through the editor, else the disk); it is refused when that text is not what the agent last
saw, and Write is refused over an existing file the agent never saw. An Edit of a file never
read goes ahead (its exact-match rule protects the file) and says so. The record is the
session's (`ToolContext.seen`), kept across its turns.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Literal

from heddle.core.tools import Seen, ToolContext, ToolError


def fingerprint(data: str | bytes) -> str:
    """Of a file's text: its UTF-8 bytes (a text read from disk is hashed as it is stored)."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()


class Hashing(io.RawIOBase):
    """A raw binary stream that hashes what is read through it, so that Read, which streams a
    file of any size, gets the fingerprint of all of it in the same pass."""

    def __init__(self, raw: io.RawIOBase):
        super().__init__()
        self.raw = raw
        self.hash = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int | None:  # type: ignore[override]
        n = self.raw.readinto(buffer)
        if n:
            self.hash.update(memoryview(buffer)[:n])
        return n

    def fileno(self) -> int:
        return self.raw.fileno()

    def close(self) -> None:
        self.raw.close()
        super().close()


def remember(ctx: ToolContext, path: Path, print_: str, source: Literal["disk", "editor"],
             by: Literal["read", "edit"]) -> None:
    """The agent now knows `path` as the text with fingerprint `print_`."""
    ctx.seen[path] = Seen(print_, source, by)


def check(ctx: ToolContext, path: Path, text: str | None, in_editor: bool, tool: str) -> bool:
    """Whether the agent knows the text an edit of `path` starts from (`text`; None: no such
    file yet). ToolError if the file changed since the agent saw it, or if Write would replace
    a file it never saw; False for an Edit of a file it never saw (which goes ahead)."""
    seen = ctx.seen.get(path)
    rel = ctx.relative(path)
    if text is None:
        return True  # a new file: nothing to lose
    if seen is None:
        if tool == "Write":
            raise ToolError(f"{rel} already exists and you have not read it, so it was not "
                            "overwritten: Read it first (Write replaces the whole file), or "
                            "change part of it with Edit.")
        return False
    if seen.fingerprint != fingerprint(text):
        where = "edited in the editor" if in_editor else "changed on disk"
        since = "you read it" if seen.by == "read" else "your last change to it"
        redo = "write it again" if tool == "Write" else "redo the edit"
        raise ToolError(f"{rel} changed since {since} ({where}), so it was not changed: Read it "
                        f"again, then {redo}.")
    return True


def unread_note(ctx: ToolContext, path: Path) -> str:
    """What an Edit of a file the agent never read says after its result."""
    return (f"\n(You had not read {ctx.relative(path)} in this session: the edit was made where "
            "old_string matched. Read the file before further edits if you need to see the "
            "code around it.)")
