"""`heddle acp`'s agent: the ACP methods, each one call into the same core as the LSP door.

The SDK's router validates the params (`-32602` names the field) and calls these methods with
them; a core `SessionError` becomes a JSON-RPC error here, in one place (`_errors`). Turns go
through `sessions.turns.start_turn` with the LSP door's `TurnEmitter` (so text is coalesced
exactly as on Heddle's own protocol) and the transcript keeps the same events, which
`updates.Translator` turns into `session/update` notifications, live or replayed.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import logging
import os
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable
from urllib.parse import unquote, urlparse

import anyio
import msgspec
from acp.exceptions import RequestError
from acp.schema import (EmbeddedResourceContentBlock, ResourceContentBlock,
                        TextContentBlock, TextResourceContents)

from heddle.acp import asking, hello
from heddle.acp.files import ClientFiles
from heddle.acp.mcp_servers import attach as attach_mcp, change_update
from heddle.acp.terminal import ClientTerminalBash
from heddle.acp.updates import COMPACTION_KINDS, Translator, compaction_update
from heddle.core.events import TerminalReason, TurnEnded
from heddle.loop.prompt import ContextItem
from heddle.permissions.policy import MODES, PermissionPolicy
from heddle.rpc import convert
from heddle.rpc.emitter import TurnEmitter
from heddle.rpc.output import TranscriptOutput
from heddle.rpc.transport import Pressure
from heddle.sessions.briefs import listed
from heddle.sessions.session import Session, SessionError, SessionRegistry
from heddle.sessions.transcript import sessions_dir
from heddle.sessions.setup import from_env
from heddle.sessions.turns import CompactionNote, TurnRequest, compact_session, start_turn
from heddle.settings import LoadedSettings, load_settings

log = logging.getLogger(__name__)

STOP_REASONS = {
    TerminalReason.COMPLETED: "end_turn",
    TerminalReason.ABORTED_STREAMING: "cancelled",
    TerminalReason.ABORTED_TOOLS: "cancelled",
    TerminalReason.MAX_TURNS: "max_turn_requests",
    TerminalReason.TOKEN_BUDGET: "max_tokens",
    TerminalReason.PROMPT_TOO_LONG: "max_tokens",
    TerminalReason.BLOCKING_LIMIT: "max_tokens",
    TerminalReason.STOP_HOOK_PREVENTED: "end_turn",
    TerminalReason.HOOK_STOPPED: "end_turn",
    TerminalReason.LOOP_DETECTED: "end_turn",
}
"""ACP `stopReason` for each Terminal reason; `model_error` is a JSON-RPC error instead
(docs/acp.md has the table)."""

MODE_INFO = {
    "default": ("Default", "Ask before edits and commands that no rule allows"),
    "acceptEdits": ("Accept edits", "Edits run without asking; commands still ask"),
    "plan": ("Plan", "Read-only: the agent looks and plans, changes nothing"),
    "bypassPermissions": ("Bypass permissions", "Everything runs without asking (deny rules "
                          "still apply)"),
}
COMMANDS = [{"name": "compact", "description": "Summarise the conversation so far to free "
             "context (keeps the last two rounds)"}]


def _errors(method: Callable) -> Callable:
    """Core errors as JSON-RPC errors (the SDK answers any other exception -32603)."""
    @functools.wraps(method)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return await method(*args, **kwargs)
        except SessionError as exc:
            if exc.kind == "notFound":
                raise RequestError(-32002, str(exc), {"kind": exc.kind}) from None
            if exc.kind == "sessionId":
                raise RequestError(-32602, f"invalid params: {exc} - at `$.sessionId`") from None
            if exc.kind == "workspace":
                raise RequestError(-32602, f"invalid params: {exc} - at `$.cwd`") from None
            if exc.kind == "prompt":
                raise RequestError(-32602, f"invalid params: {exc} - at `$.prompt`") from None
            if exc.kind in ("busy", "compacting"):  # one prompt at a time per session
                what = "its answer" if exc.kind == "busy" else "the compaction to end"
                raise RequestError(-32001, f"{exc}: wait for {what}, or send session/cancel "
                                   "first", {"kind": exc.kind}) from None
            raise RequestError(-32000, str(exc), {"kind": exc.kind}) from None
    return wrapper


class HeddleAgent:
    """The ACP agent. `request` and `notify` reach the client (set by `heddle.acp.serve`)."""

    def __init__(self, env: dict[str, str], pressure: Pressure | None = None):
        self.env = env
        self.pressure = pressure or Pressure()
        self.setup = setup = from_env(env, compactions=self._compaction)  # as the LSP door's
        self.default_model = setup.default_model
        self.permission_timeout = setup.permission_timeout
        self.fs_timeout = setup.edit_timeout
        self.sessions = SessionRegistry(None if env.get("HEDDLE_NO_TRANSCRIPTS")
                                        else sessions_dir(env))
        self.model = setup.model
        self.turn_deps = setup.deps
        self.builtin_bash = self.turn_deps.tools["Bash"]
        self.client_fs = (False, False)
        """(readTextFile, writeTextFile) as the client advertised them."""
        self.client_compaction = False
        """Whether the client declared `session.compaction` (set by `heddle.acp.door` from the
        raw `initialize`: the SDK's schema does not know it yet)."""
        self._emitters: dict[str, list[TurnEmitter]] = {}
        """The running turn's emitters, by session (a compaction update follows what they
        hold)."""
        self._compacting: dict[str, anyio.CancelScope] = {}
        """`/compact` running, by session (`session/cancel` cancels it)."""
        self._started: dict[str, int] = {}
        """Compactions shown to the client, by session."""
        self.translators: dict[str, Translator] = {}
        self.request: Callable[[str, dict[str, Any]], Any] = _unconnected
        self.notify: Callable[[str, dict[str, Any]], None] = lambda method, params: None

    def use_terminal(self, advertised: bool) -> None:
        """Bash runs in the client's terminal when the client advertised `terminal`."""
        tools = dict(self.turn_deps.tools)
        tools["Bash"] = ClientTerminalBash(self.request_later, self._terminal_shown) \
            if advertised else self.builtin_bash
        self.turn_deps = replace(self.turn_deps, tools=tools)

    async def request_later(self, method: str, params: dict[str, Any]) -> Any:
        return await self.request(method, params)  # `request` is set once connected

    def _terminal_shown(self, session_id: str, call_id: str, terminal_id: str) -> None:
        translator = self.translators.get(session_id)
        if translator is not None and call_id:
            self.update(session_id, translator.terminal(call_id, terminal_id))

    @property
    def authenticated(self) -> bool:
        return hello.authenticated(self.env)

    def update(self, session_id: str, update: dict[str, Any]) -> None:
        if update["sessionUpdate"] in COMPACTION_KINDS and not self.client_compaction:
            return  # never what the client did not declare
        self.notify("session/update", {"sessionId": session_id, "update": update})

    def _compaction(self, session: Session, note: CompactionNote) -> None:
        """A compaction started or ended (in a turn, or `/compact`): after what the turn's
        emitters hold, so it keeps its place in the timeline."""
        if not self.client_compaction:
            return
        if note.status == "in_progress":
            self._started[session.id] = self._started.get(session.id, 0) + 1
        for emitter in self._emitters.get(session.id, ()):
            emitter.flush()
        tokens = (note.tokens_before, note.tokens_after) if note.status == "completed" else None
        self.update(session.id, compaction_update(note.compaction_id, note.status, note.summary,
                                                  note.error, tokens))

    # -- initialize, authenticate ------------------------------------------------------------
    async def initialize(self, protocol_version: int, client_capabilities: Any = None,
                         client_info: Any = None, **_: Any) -> dict[str, Any]:
        fs = getattr(client_capabilities, "fs", None)
        self.client_fs = (bool(getattr(fs, "read_text_file", False)),
                          bool(getattr(fs, "write_text_file", False)))
        self.use_terminal(bool(getattr(client_capabilities, "terminal", False)))
        log.info("initialize from %s (protocol %s, fs read %s write %s)",
                 getattr(client_info, "name", "an unnamed client"), protocol_version,
                 *self.client_fs)
        return hello.initialize_result(self.env, self.sessions.directory is not None)

    async def authenticate(self, method_id: str, **_: Any) -> dict[str, Any]:
        if self.authenticated:
            return {}
        raise RequestError(-32000, "Authentication required: " + hello.AUTH_METHOD["description"])

    def _need_auth(self) -> None:
        if not self.authenticated:
            raise RequestError(-32000, "Authentication required: " + hello.AUTH_METHOD["description"],
                               {"authMethods": [hello.AUTH_METHOD["id"]]})

    # -- sessions ----------------------------------------------------------------------------
    @_errors
    async def new_session(self, cwd: str, mcp_servers: list | None = None, **_: Any
                          ) -> dict[str, Any]:
        self._need_auth()
        if "\0" in cwd:  # before realpath, which would raise ValueError
            raise SessionError("workspace", f"workspace {cwd!r} is no path: it holds a NUL")
        settings = load_settings(Path(os.path.realpath(cwd)) if os.path.isabs(cwd) else None)
        policy = PermissionPolicy.from_settings(settings)
        session = self.sessions.new(cwd, settings.settings.model or self.default_model, policy,
                                    defaults=self.setup.defaults_for(settings),
                                    mode_from_settings=True)
        session.cache = settings.settings.cache
        self._attach(session)
        log.info("session %s on %s (model %s, mode %s)", session.id, session.workspace,
                 session.model, policy.mode)
        self._later_commands(session)
        mcp = await attach_mcp(session, settings, mcp_servers)
        self._watch_mcp(session)
        return {"sessionId": session.id, "modes": self._modes(session),
                "_meta": self._meta(settings.warnings, mcp, session)}

    @_errors
    async def load_session(self, cwd: str, session_id: str, mcp_servers: list | None = None,
                           **_: Any) -> dict[str, Any]:
        self._need_auth()
        await self.sessions.settled(session_id)
        session, loaded, settings = self._load(session_id)
        replay = Translator(session.workspace, replay=True)
        manual = list(loaded.compactions)  # (events before it, summary), in order
        turn = None
        for index, (turn_id, event) in enumerate(loaded.events):
            while manual and manual[0][0] <= index:
                self.update(session.id, replay.compacted(manual.pop(0)[1]))
            if turn_id != turn:
                for update in replay.close():
                    self.update(session.id, update)
                turn = turn_id
            for update in replay(event):
                self.update(session.id, update)
        for update in replay.close():
            self.update(session.id, update)
        for _, summary in manual:
            self.update(session.id, replay.compacted(summary))
        self._later_commands(session)
        mcp = await attach_mcp(session, settings, mcp_servers)
        self._watch_mcp(session)
        return {"modes": self._modes(session), "_meta": self._meta(loaded.warnings, mcp, session)}

    @_errors
    async def resume_session(self, session_id: str, cwd: str, mcp_servers: list | None = None,
                             **_: Any) -> dict[str, Any]:
        self._need_auth()
        await self.sessions.settled(session_id)
        session, loaded, settings = self._load(session_id)
        self._later_commands(session)
        mcp = await attach_mcp(session, settings, mcp_servers)
        self._watch_mcp(session)
        return {"modes": self._modes(session), "_meta": self._meta(loaded.warnings, mcp, session)}

    @_errors
    async def close_session(self, session_id: str, **_: Any) -> dict[str, Any]:
        """Forget the live session and stop its MCP servers (its transcript stays)."""
        await self.sessions.close(session_id)
        self.translators.pop(session_id, None)
        return {}

    @_errors
    async def list_sessions(self, cwd: str | None = None, cursor: str | None = None, **_: Any
                            ) -> dict[str, Any]:
        return {"sessions": [
            {"sessionId": i.id, "cwd": i.workspace, "title": i.title or None,
             "updatedAt": _iso(i.updated_at)} for i in self.sessions.list(cwd)]}

    def _load(self, session_id: str):
        """The session, its transcript as read, and its settings (None: it was live)."""
        read: list[LoadedSettings] = []

        def policy_for(mode: str | None, workspace: str) -> PermissionPolicy:
            read.append(load_settings(Path(workspace)))
            return PermissionPolicy.from_settings(read[-1], mode)
        session, loaded = self.sessions.load(session_id, policy_for, self.setup.options)
        if read:  # the settings' fallback model and limits, read with the session's folder
            session.options = session.options.over(self.setup.defaults_for(read[-1]))
            session.cache = read[-1].settings.cache
        self._attach(session)
        return session, loaded, read[-1] if read else None

    def _attach(self, session: Session) -> None:
        """The client's files for the session's tools, when it advertised them."""
        read, write = self.client_fs
        session.documents = (ClientFiles(session.id, self.request, read, write, self.fs_timeout)
                             if read or write else None)
        self.translators[session.id] = Translator(session.workspace)

    def _modes(self, session: Session) -> dict[str, Any]:
        return {"currentModeId": session.policy.mode, "availableModes": [
            {"id": m, "name": MODE_INFO[m][0], "description": MODE_INFO[m][1]} for m in MODES]}

    def _meta(self, warnings: list[str], mcp: dict[str, Any], session: Session
              ) -> dict[str, Any]:
        """What Heddle says beside the answer: settings warnings, the MCP servers, the
        instruction files in force (as `session/new` of Heddle's protocol lists them)."""
        files = [msgspec.to_builtins(f) for f in convert.instructions(listed(session.briefing))]
        return {"heddle": {"warnings": list(warnings), "mcp": mcp, "instructions": files}}

    def _watch_mcp(self, session: Session) -> None:
        """From the answer on (whose `_meta` says how the MCP servers are now), each change of
        one reaches the client as an agent message, after what the running turn's emitters
        hold (so it does not split a sentence of the answer)."""
        if session.mcp is None:
            return

        def changed(change) -> None:
            for emitter in self._emitters.get(session.id, ()):
                emitter.flush()
            self.update(session.id, change_update(change))
        session.mcp.watch(changed)

    def _later_commands(self, session: Session) -> None:
        """The slash commands, just after the answer (the client knows the session then)."""
        asyncio.get_running_loop().call_soon(self.update, session.id, {
            "sessionUpdate": "available_commands_update", "availableCommands": COMMANDS})

    # -- modes -------------------------------------------------------------------------------
    @_errors
    async def set_session_mode(self, session_id: str, mode_id: str, **_: Any) -> dict[str, Any]:
        session = self.sessions.get(session_id)
        if mode_id not in MODES:
            raise RequestError(-32602, f"invalid params: unknown mode {mode_id!r} (one of "
                               f"{', '.join(MODES)}) - at `$.modeId`")
        session.policy.mode = mode_id
        if session.transcript is not None:  # a later load or resume continues in this mode
            session.transcript.configured(mode_id, None)
        log.info("session %s: mode %s", session.id, mode_id)
        self.update(session.id, {"sessionUpdate": "current_mode_update",
                                 "currentModeId": mode_id})
        return {}

    # -- prompts -----------------------------------------------------------------------------
    @_errors
    async def prompt(self, session_id: str, prompt: list, **_: Any) -> dict[str, Any]:
        session = self.sessions.get(session_id)
        text, context = prompt_of(prompt)
        if session.id in self._compacting:  # both would replace the conversation
            raise SessionError("compacting", f"session {session.id} is running /compact")
        if text.strip().split(" ", 1)[0] == "/compact":
            return await self._compact(session)
        translator = self.translators.setdefault(session.id, Translator(session.workspace))
        kept = TranscriptOutput()
        emitters: list[TurnEmitter] = []

        def send(params) -> None:
            if session.transcript is not None and kept.keep(params.turn_id, params.event):
                session.transcript.event(params.turn_id, params.event)
            for update in translator(msgspec.to_builtins(params.event)):
                self.update(session.id, update)

        def emit_for(turn_id: str) -> TurnEmitter:
            emitter = TurnEmitter(session.id, turn_id, send, self.pressure)
            emitter.started(text, session.model)
            emitters.append(emitter)
            return emitter

        request = TurnRequest(text, context)
        self._emitters[session.id] = emitters
        try:
            turn_id, terminal = await start_turn(
                session, request, self.turn_deps, emit_for,
                lambda turn_id: asking.asker(session, self.request, translator,
                                             self.permission_timeout))
        finally:
            if self._emitters.get(session.id) is emitters:
                del self._emitters[session.id]
        for emitter in emitters:
            if emitter.turn_id == turn_id:
                emitter(TurnEnded(terminal.reason, terminal.usage, terminal.error))
            emitter.flush()
        for update in translator.close():  # the core finished every call; this is a guard
            self.update(session.id, update)
        log.info("turn %s ended: %s", turn_id, terminal.reason.value)
        if terminal.reason is TerminalReason.MODEL_ERROR:
            err = terminal.error
            raise RequestError(-32603, f"the model call failed: {err.message if err else '?'}",
                               {"reason": "model_error", "code": err.code if err else None,
                                "status": err.status if err else None})
        u = terminal.usage
        return {"stopReason": STOP_REASONS[terminal.reason], "usage": {
            "totalTokens": u.prompt_tokens + u.output_tokens, "inputTokens": u.input_tokens,
            "outputTokens": u.output_tokens, "cachedReadTokens": u.cache_read_input_tokens,
            "cachedWriteTokens": u.cache_creation_input_tokens}}

    async def _compact(self, session: Session) -> dict[str, Any]:
        """`/compact`. A client that declared `session.compaction` sees it as compaction
        updates (`_compaction`); any other, and one for which no compaction started (nothing
        to compact), is told in an agent message. `session/cancel` cancels it."""
        started = self._started.get(session.id, 0)
        said = ""
        with anyio.CancelScope() as scope:
            self._compacting[session.id] = scope
            try:
                before, after, _ = await compact_session(session, self.turn_deps)
                said = f"Compacted the conversation: {before} → {after} tokens."
            except SessionError as exc:
                if exc.kind in ("busy", "compacting"):
                    raise
                said = f"Nothing was compacted: {exc}"
            finally:
                del self._compacting[session.id]
        if scope.cancelled_caught:
            log.info("session %s: /compact cancelled", session.id)
            return {"stopReason": "cancelled"}
        if not (self.client_compaction and self._started.get(session.id, 0) > started):
            self.update(session.id, {"sessionUpdate": "agent_message_chunk",
                                     "content": {"type": "text", "text": said}})
        return {"stopReason": "end_turn"}

    async def cancel(self, session_id: str, **_: Any) -> None:
        try:
            session = self.sessions.get(session_id)
        except SessionError:
            log.info("session/cancel for unknown session %s", session_id)
            return
        if session.turn is not None:
            log.info("cancelling turn %s (session/cancel)", session.turn.id)
            session.turn.cancel()
        if session.id in self._compacting:
            log.info("cancelling /compact of session %s (session/cancel)", session.id)
            self._compacting[session.id].cancel()

    async def cancel_all(self) -> None:
        """Cancel every turn and wait for them to end."""
        for turn in self.sessions.running_turns():
            turn.cancel()
        for turn in self.sessions.running_turns():
            await turn.done.wait()


def prompt_of(blocks: list) -> tuple[str, list[ContextItem]]:
    """The prompt's text and its resources as Heddle's context items."""
    texts: list[str] = []
    context: list[ContextItem] = []
    for block in blocks:
        if isinstance(block, TextContentBlock):
            texts.append(block.text)
        elif isinstance(block, ResourceContentBlock):
            context.append(ContextItem(_path(block.uri)))
        elif isinstance(block, EmbeddedResourceContentBlock):
            res = block.resource
            if isinstance(res, TextResourceContents):
                context.append(ContextItem(_path(res.uri), res.text))
            else:
                context.append(ContextItem(_path(res.uri)))  # binary: named, not shown
        else:
            raise RequestError(-32602, f"invalid params: {block.type} content is not supported "
                               "(promptCapabilities says so) - at `$.prompt`")
    return "\n".join(texts), context


def _iso(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).isoformat(
        timespec="seconds")


def _path(uri: str) -> str:
    return unquote(urlparse(uri).path) if uri.startswith("file:") else uri



async def _unconnected(method: str, params: dict[str, Any]) -> Any:
    raise ConnectionError("not connected to a client")
