"""The Tool interface: what a tool is, what it runs with, and what it returns.

Every layer that handles tools shares these: the tools implement them, permissions decide on
them, the loop runs them. Implementations and their helpers are in `heddle.tools`.
"""

from __future__ import annotations

import contextvars
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Awaitable, Any, Callable, ClassVar, Literal, Protocol, runtime_checkable

import msgspec

from heddle.core.diagnostics import Diagnostics
from heddle.core.events import CoreEvent, OutputStream, Preview, ToolOutputChunk
from heddle.core.hunks import Review


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
    exit_code: int | None = None
    """A command's exit status; None: no command, or a signal ended it."""
    signal: str | None = None
    """The signal that ended a command (`SIGKILL`)."""
    images: tuple[tuple[str, str], ...] = ()
    """(media type, base64 data) of images the result shows the model (an MCP tool's)."""

    @property
    def failed(self) -> bool:
        """A command exited non-zero or was killed: the editor shows the call as failed (the
        model reads the exit status in the result's text, as it always did)."""
        return self.exit_code not in (None, 0) or self.signal is not None


@dataclass(frozen=True)
class Buffer:
    """An open document as the editor last reported it."""

    uri: str
    text: str
    version: int


class Editor(Protocol):
    """Changes open documents in the editor (LSP `workspace/applyEdit`)."""

    async def apply(self, buffer: Buffer, new_text: str, label: str) -> str | None:
        """Ask the editor to turn `buffer` (at its version) into `new_text`; None when it did,
        else why not (the editor's reason, no answer, an error reply)."""
        ...


class EditorBuffers(Protocol):
    """What the editor holds open (LSP document sync)."""

    def unsaved(self, path: Path) -> bool:
        """Whether the editor's text of `path` differs from the file on disk."""
        ...

    def buffer(self, path: Path) -> Buffer | None:
        """The open document of `path`; None when it is not open."""
        ...

    @property
    def editor(self) -> Editor | None:
        """How to change open documents; None: the client cannot (no applyEdit)."""
        ...

    @property
    def diagnostics(self) -> Diagnostics | None:
        """How to ask for an open document's diagnostics; None: the client cannot."""
        ...


@dataclass(frozen=True)
class Seen:
    """What the agent last saw of a file: the fingerprint of its whole text (`Read` of part of
    a file counts), where that text came from, and how the agent came to see it."""

    fingerprint: str
    source: Literal["disk", "editor"]
    """`editor`: the editor's buffer of the open document, saved or not."""
    by: Literal["read", "edit"]
    """`edit`: the agent's own Edit, MultiEdit or Write made this text."""


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
    diagnostics_wait: float = 0.0
    """Seconds an edit of an open document waits at most for the editor's diagnostics of the
    result (`[editor] diagnostics_wait`); 0: it does not ask for them."""
    run_agent: Callable[..., Awaitable[ToolOutput]] | None = None
    """Runs a sub-agent: `await run_agent(name, prompt, tool_call_id)`. None inside sub-agents
    (they cannot start their own)."""
    permission_mode: Callable[[], str] = lambda: "default"
    """The session's permission mode now."""
    switch_mode: Callable[[str], None] | None = None
    """Puts the session in another permission mode (the user approved a plan and chose it);
    None: this context cannot (a sub-agent)."""
    seen: dict[Path, Seen] = field(default_factory=dict)
    """What the agent read and wrote, per resolved path: the session's, kept across its turns
    (Edit and Write refuse a file that changed since; `heddle.tools.reads`)."""
    on_file: Callable[[str, Path], str | None] | None = None
    """Told after tool `name` read or changed the file `path` without error; returns text for
    the model to read after the call's result (the instructions of a folder it meets for the
    first time), or None. None: nobody is told."""

    def output(self, stream: OutputStream, data: bytes, hook: str | None = None) -> None:
        """Report bytes the running call's command (or `hook`'s) wrote, for the editor to show
        live. Cheap: the door coalesces and bounds what it sends."""
        if data:
            self.emit(ToolOutputChunk(CURRENT_CALL.get(), stream, data, hook))

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


@runtime_checkable
class ReviewedTool(Protocol):
    """A tool whose edit the user can take in part or change (Edit, MultiEdit, Write)."""

    async def run_reviewed(self, inp: Any, ctx: ToolContext, review: Review) -> ToolOutput:
        """Write `review.written` instead of the proposal, and tell the model so."""
        ...


class Tool(Protocol):
    name: ClassVar[str]
    description: ClassVar[str]
    input_type: ClassVar[type[msgspec.Struct]]
    concurrency_safe: ClassVar[bool]
    read_only: ClassVar[bool]
    max_result_chars: ClassVar[int]

    def title(self, inp: Any, ctx: ToolContext) -> str:
        """One human line naming the call, as the editor shows it."""
        ...

    def prompt_title(self, inp: Any, ctx: ToolContext) -> str:
        """What a permission prompt for the call is titled: what will happen, in the tool's
        words (Bash: the command), never only the model's own label for it."""
        ...

    def normalise(self, inp: Any, ctx: ToolContext) -> Any:
        """Resolve paths (raises ToolError); the result is what permission rules see."""
        ...

    async def preview(self, inp: Any, ctx: ToolContext) -> Preview | None: ...

    def rule_for(self, inp: Any, ctx: ToolContext) -> str:
        """The rule "allow always" would save for this call."""
        ...

    async def run(self, inp: Any, ctx: ToolContext) -> ToolOutput: ...
