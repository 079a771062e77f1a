"""Sessions: a workspace, a model, a permission policy and the conversation so far."""

from __future__ import annotations

import logging
import os
import time
import uuid
from dataclasses import astuple, dataclass, field
from pathlib import Path
from typing import Callable

import anyio

from heddle.core.messages import Message
from heddle.ids import is_session_id, session_id_problem
from heddle.loop.thinking import MIN_BUDGET
from heddle.core.tools import Seen
from heddle.mcp.servers import McpServers
from heddle.permissions.policy import PermissionPolicy, Rule, RuleError
from heddle.rules import KINDS
from heddle.settings import LoopSettings, ModelLimitSettings
from heddle.sessions.briefs import Briefing, read as read_briefing
from heddle.sessions.transcript import (FORMAT_VERSION, Header, Loaded, TranscriptError,
                                        TranscriptInUse, TranscriptWriter, held_elsewhere, read)
from heddle.settings import CacheSettings, EditorSettings
from heddle.tools.documents import EditorDocuments

log = logging.getLogger(__name__)


class SessionError(Exception):
    """A request about sessions that cannot be served; `kind` picks the wire error code."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


HANDOVER_WAIT = 3.0
"""Seconds a load waits for another process to release a session (then: `inUse`)."""


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
    counts as answered only when that turn completes (or the session is closed), else it runs
    as a turn of its own."""

    text: str
    state: str = "pending"
    """`pending`, `started` (taken in by the running turn) or `answered`."""
    answered_by: tuple[str, object] | None = None
    """(turn id, Terminal) of the turn that answered it: completed with it, or ended by a
    close of the session."""


@dataclass(frozen=True)
class SessionOptions:
    fallback_model: str | None = None
    thinking_budget: int | None = None
    """Tokens; 0: thinking off; None: auto (on where the model thinks, `heddle.loop.thinking`)."""
    summary_model: str | None = None
    compact_model: str | None = None
    effort: str | None = None
    """`output_config.effort` of its calls; None: the model's default."""
    model_limits: dict[str, ModelLimitSettings] | None = None
    """The settings' `[models]` limits (not kept in the transcript: a loaded session reads the
    settings again)."""
    loop: LoopSettings | None = None
    """The settings' `[loop]`, the repeat guard's limits (not kept in the transcript either)."""

    def over(self, defaults: SessionOptions) -> SessionOptions:
        """These options, with `defaults` where one is not set."""
        return SessionOptions(*(mine if mine is not None else default
                                for mine, default in zip(astuple(self), astuple(defaults))))


@dataclass
class Session:
    id: str
    workspace: Path
    model: str
    policy: PermissionPolicy
    system_extra: str | None = None
    messages: tuple[Message, ...] = ()
    turn: RunningTurn | None = None
    compacting: bool = False
    """A compaction of the idle session is running (`compact_session`): no turn may start
    meanwhile, since both would replace the conversation."""
    closing: anyio.Event | None = None
    """Set by `SessionRegistry.close` while it ends the session; fired once it is no longer
    live."""
    turns_run: int = 0
    permission_lock: anyio.Lock = field(default_factory=anyio.Lock)
    options: SessionOptions = SessionOptions()
    queue: list[QueuedPrompt] = field(default_factory=list)
    transcript: TranscriptWriter | None = None
    created_at: float = field(default_factory=time.time)
    compactor: object | None = None
    """The session's compactor with its circuit breaker (made at the first turn)."""
    documents: EditorDocuments | None = None
    """The editor's open documents (one set for the daemon's sessions)."""
    cache: CacheSettings = CacheSettings()
    """The settings files' `[cache]` (unset fields: the daemon's defaults)."""
    editor: EditorSettings = EditorSettings()
    """The settings files' `[editor]` (unset fields: the daemon's defaults)."""
    last_call_at: float | None = None
    """`time.monotonic()` when its last turn ended (about its last model call); None: no turn
    in this daemon yet."""
    mode_told: str | None = None
    """The permission mode the model last heard of (a plan-mode note, an approved plan); None:
    none yet in this daemon."""
    mcp: McpServers | None = None
    """Its MCP servers (`heddle.mcp.servers.start_servers`); None: it has none. Its turns
    offer their tools; `SessionRegistry.close` stops them."""
    seen: dict[Path, Seen] = field(default_factory=dict)
    """What its agent read and wrote (`heddle.tools.reads`), kept across its turns; a loaded
    session starts with none (the transcript does not hold the files' texts)."""
    briefing: Briefing | None = None
    """Its instruction files and environment (`heddle.sessions.briefs`); None: no briefing."""

    def expect_open(self) -> None:
        """SessionError `notFound` if the session is being closed: it is as good as gone."""
        if self.closing is not None:
            raise SessionError("notFound", f"session {self.id} is being closed")


@dataclass(frozen=True)
class SessionInfo:
    id: str
    title: str
    workspace: str
    model: str
    created_at: float
    updated_at: float
    turns: int
    last_reason: str | None
    live: bool


class SessionRegistry:
    """The sessions of this daemon, and the transcripts of every session on disk."""

    def __init__(self, directory: Path | None = None) -> None:
        self._sessions: dict[str, Session] = {}
        self.directory = directory
        """Where transcripts live; None keeps sessions in memory only."""
        self.documents = EditorDocuments()

    def new(self, workspace: str, model: str, policy: PermissionPolicy,
            system_extra: str | None = None, options: SessionOptions = SessionOptions(),
            defaults: SessionOptions = SessionOptions(), mode_from_settings: bool = False
            ) -> Session:
        """A new session; `options` (kept in its transcript) over the daemon's `defaults`;
        `mode_from_settings`: the policy's mode is the settings', not one the client asked for."""
        if options.thinking_budget is not None and 0 < options.thinking_budget < MIN_BUDGET:
            raise SessionError("options", f"a thinking budget is 0 (thinking off) or at least "
                               f"{MIN_BUDGET} tokens, not {options.thinking_budget}")
        path = Path(workspace)
        if not path.is_absolute():
            raise SessionError("workspace", f"workspace must be an absolute path, got {workspace!r}")
        if not path.is_dir():
            raise SessionError("workspace", f"workspace {workspace} is not an existing folder")
        session = Session(uuid.uuid4().hex, Path(os.path.realpath(path)), model, policy,
                          system_extra, options=options.over(defaults), documents=self.documents)
        session.briefing = read_briefing(session.workspace)
        if self.directory is not None:
            session.transcript = TranscriptWriter(
                self.directory / f"{session.id}.jsonl",
                Header(FORMAT_VERSION, session.id, str(session.workspace), model,
                       session.created_at, policy.mode, system_prompt=system_extra,
                       thinking_budget=options.thinking_budget,
                       fallback_model=options.fallback_model,
                       summary_model=options.summary_model, compact_model=options.compact_model,
                       effort=options.effort,
                       mode_from_settings=mode_from_settings))
            policy.on_session_rules = session.transcript.rules
        self._sessions[session.id] = session
        return session

    def list(self, workspace: str | None = None) -> list[SessionInfo]:
        """Every session with a transcript (newest first), optionally of one workspace."""
        found: list[SessionInfo] = []
        if workspace is not None and "\0" in workspace:
            raise SessionError("workspace", f"workspace {workspace!r} is no path: it holds a NUL")
        paths = sorted(self.directory.glob("*.jsonl")) if self.directory and self.directory.is_dir() else []
        for path in paths:
            try:
                t = _read_own(path, messages=False)
            except (TranscriptError, OSError) as exc:
                log.warning("skipping %s: %s", path.name, exc)
                continue
            h = t.header
            if workspace is not None and os.path.realpath(workspace) != h.workspace:
                continue
            found.append(SessionInfo(h.session_id, t.title, h.workspace, t.model or h.model,
                                     h.created_at, t.updated_at, t.turns, t.last_reason,
                                     h.session_id in self._sessions))
        return sorted(found, key=lambda i: i.updated_at, reverse=True)

    def load(self, session_id: str, policy_for: Callable[[str | None, str], PermissionPolicy],
             defaults: SessionOptions) -> tuple[Session, Loaded]:
        """Bring a session back from its transcript (or return the live one). A turn Heddle
        stopped during is closed, and the repair is written to the transcript, so every later
        load reads the same history."""
        if not is_session_id(session_id):  # before it makes a path: `../../x` names no session
            raise SessionError("sessionId", session_id_problem(session_id))
        path = self.directory / f"{session_id}.jsonl" if self.directory else None
        if path is None or not os.path.lexists(path):
            raise SessionError("notFound", f"no session {session_id!r}")
        live = self._sessions.get(session_id)
        running = live.turn.id if live is not None and live.turn is not None else None
        transcript = None
        if live is None:  # first the lock: what is read (and repaired) is no one else's
            try:
                transcript = TranscriptWriter(path)
            except TranscriptInUse:
                raise SessionError("inUse", f"session {session_id} is open in another Heddle "
                                   "(an editor window or heddle ask): end it there first, or "
                                   "start a new session") from None
            except OSError as exc:
                raise SessionError("transcript", f"cannot open {path.name}: {exc}") from None
        try:
            loaded = _read_own(path, close=running is None)
        except (TranscriptError, OSError) as exc:
            if transcript is not None:
                transcript.close()
            why = str(exc) if isinstance(exc, TranscriptError) else f"cannot read {path.name}: {exc}"
            raise SessionError("transcript", why) from None
        if live is not None:  # its history is in memory; the repairs are only for the replay
            return live, loaded
        try:
            session = self._revive(loaded, transcript, policy_for, defaults)
        except BaseException:
            transcript.close()
            raise
        self._sessions[session_id] = session
        return session, loaded

    def _revive(self, loaded: Loaded, transcript: TranscriptWriter,
                policy_for: Callable[[str | None, str], PermissionPolicy],
                defaults: SessionOptions) -> Session:
        """The live session a transcript read (and locked) describes."""
        h = loaded.header
        mode = loaded.permission_mode or (None if h.mode_from_settings else h.permission_mode)
        policy = policy_for(mode, h.workspace)
        for kind, pattern in loaded.session_rules:
            try:
                if kind not in KINDS:
                    raise RuleError(f"unknown kind {kind!r}")
                policy.add(Rule(kind, pattern, "session"))
            except RuleError as exc:
                loaded.warnings.append(f"skipped the session rule {pattern!r}: {exc}")
        options = SessionOptions(h.fallback_model, h.thinking_budget, h.summary_model,
                                 h.compact_model, h.effort)
        transcript.mend()  # (after the read, which reported a record cut off)
        for record in loaded.repairs:
            transcript.record(record)
        policy.on_session_rules = transcript.rules
        session = Session(h.session_id, Path(h.workspace), loaded.model or h.model, policy,
                          h.system_prompt,
                          messages=loaded.messages, turns_run=loaded.turns,
                          options=options.over(defaults), transcript=transcript,
                          created_at=h.created_at, documents=self.documents)
        session.briefing = read_briefing(session.workspace)
        for warning in loaded.warnings:
            log.warning("session %s: %s", h.session_id, warning)
        return session

    def get(self, session_id: str) -> Session:
        try:
            return self._sessions[session_id]
        except KeyError:
            raise SessionError("notFound", f"no session {session_id!r}") from None

    async def close(self, session_id: str) -> int:
        """End a live session: its running turn is cancelled (and so is each queued prompt
        that starts after it), then it is forgotten and its MCP servers stopped; returns how
        many. Its transcript stays. A close while one runs waits for that one (0 stopped)."""
        session = self.get(session_id)
        if session.closing is not None:
            await session.closing.wait()
            return 0
        session.closing = anyio.Event()
        try:
            while session.turn is not None:
                running = session.turn
                running.cancel()
                await running.done.wait()
            del self._sessions[session_id]
            if session.transcript is not None:
                session.transcript.close()  # another daemon may load it now
            if session.mcp is None:
                return 0
            stopped = len(session.mcp.servers)
            await session.mcp.close()
            return stopped
        finally:
            session.closing.set()

    async def settled(self, session_id: str) -> None:
        """Wait for a close of the session that is under way (a load after it reads the
        transcript, rather than taking the session that is going away); and, up to
        HANDOVER_WAIT seconds, for another process that holds it to let it go (the daemon of a
        window being reloaded, or restarted, is still exiting as its successor loads)."""
        live = self._sessions.get(session_id)
        if live is not None and live.closing is not None:
            await live.closing.wait()
        if live is not None or self.directory is None or not is_session_id(session_id):
            return
        path = self.directory / f"{session_id}.jsonl"
        if not held_elsewhere(path):  # free, or no such session: the load answers at once
            return
        log.info("waiting for another process to release session %s (at most %g s)",
                 session_id, HANDOVER_WAIT)
        with anyio.move_on_after(HANDOVER_WAIT):
            while held_elsewhere(path):
                await anyio.sleep(0.05)

    async def stop_servers(self) -> None:
        """Stop the MCP servers of every live session (the daemon is exiting)."""
        servers = [s.mcp for s in self._sessions.values() if s.mcp is not None]
        async with anyio.create_task_group() as tg:
            for mcp in servers:
                tg.start_soon(mcp.close)

    def running_turns(self) -> list[RunningTurn]:
        return [s.turn for s in self._sessions.values() if s.turn is not None]

    def __len__(self) -> int:
        return len(self._sessions)


def _read_own(path: Path, messages: bool = True, close: bool = True) -> Loaded:
    """`read` a transcript of the sessions folder, whose header must name the session its file
    is named after: a planted `<id>.jsonl` whose header says `../../..` would otherwise give
    the session that id, and its saved results a folder far from the state folder."""
    loaded = read(path, messages, close)
    named = loaded.header.session_id
    if named != path.stem or not is_session_id(named):
        raise TranscriptError(f"{path.name} is not a Heddle transcript: its header names the "
                              f"session {named[:80]!r}, not {path.stem[:80]!r}")
    return loaded
