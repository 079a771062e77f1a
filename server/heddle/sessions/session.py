"""Sessions: a workspace, a model, a permission policy and the conversation so far."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from heddle.loop.messages import Message
from heddle.permissions.policy import PermissionPolicy


class SessionError(Exception):
    """A request about sessions that cannot be served; `kind` picks the wire error code."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


@dataclass
class RunningTurn:
    id: str
    scope: anyio.CancelScope
    done: anyio.Event = field(default_factory=anyio.Event)
    request_id: object = None
    abort_reason: str | None = None
    """`interrupt` when a new prompt replaced the turn; None for a plain cancel."""

    def cancel(self, reason: str | None = None) -> None:
        if not self.scope.cancel_called:
            self.abort_reason = reason
        self.scope.cancel()


@dataclass
class QueuedPrompt:
    """A prompt sent while a turn ran. The running turn takes it in at its next step; it
    counts as answered only when that turn completes, else it runs as a turn of its own."""

    text: str
    state: str = "pending"
    """`pending`, `started` (taken in by the running turn) or `completed`."""
    answered_by: tuple[str, object] | None = None
    """(turn id, Terminal) of the turn that completed with it."""


@dataclass(frozen=True)
class SessionOptions:
    fallback_model: str | None = None
    thinking_budget: int | None = None
    summary_model: str | None = None


@dataclass
class Session:
    id: str
    workspace: Path
    model: str
    policy: PermissionPolicy
    system_extra: str | None = None
    messages: tuple[Message, ...] = ()
    turn: RunningTurn | None = None
    turns_run: int = 0
    permission_lock: anyio.Lock = field(default_factory=anyio.Lock)
    options: SessionOptions = SessionOptions()
    queue: list[QueuedPrompt] = field(default_factory=list)


class SessionRegistry:
    def __init__(self) -> None:
        self._sessions: dict[str, Session] = {}

    def new(self, workspace: str, model: str, policy: PermissionPolicy,
            system_extra: str | None = None, options: SessionOptions = SessionOptions()) -> Session:
        path = Path(workspace)
        if not path.is_absolute():
            raise SessionError("workspace", f"workspace must be an absolute path, got {workspace!r}")
        if not path.is_dir():
            raise SessionError("workspace", f"workspace {workspace} is not an existing folder")
        session = Session(uuid.uuid4().hex, Path(os.path.realpath(path)), model, policy,
                          system_extra, options=options)
        self._sessions[session.id] = session
        return session

    def get(self, session_id: str) -> Session:
        try:
            return self._sessions[session_id]
        except KeyError:
            raise SessionError("notFound", f"no session {session_id!r}") from None

    def running_turns(self) -> list[RunningTurn]:
        return [s.turn for s in self._sessions.values() if s.turn is not None]

    def __len__(self) -> int:
        return len(self._sessions)
