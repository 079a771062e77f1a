"""Handlers for Heddle's methods: typed params in, one call into the core, typed result out."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import msgspec
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException

import heddle_protocol as wire
from heddle_protocol.events import TurnEventParams
from heddle.core.events import TurnEnded
from heddle.mcp import config as mcp_config
from heddle.mcp.servers import STARTUP_BOUND, start_servers
from heddle.permissions.policy import PermissionAnswer, PermissionPolicy, PermissionPrompt
from heddle.rpc import convert
from heddle.rpc.daemon import Daemon
from heddle.rpc.dispatch import handler
from heddle.rpc.emitter import TurnEmitter
from heddle.rpc.output import TranscriptOutput
from heddle.rpc.permissions import settings_for
from heddle.sessions.briefs import listed
from heddle.sessions.configure import configure
from heddle.sessions.session import Session, SessionOptions
from heddle.sessions.turns import TurnRequest, compact_session, start_turn
from heddle.settings import LoadedSettings

log = logging.getLogger(__name__)



def register(server: Daemon) -> None:
    @server.feature(lsp.SHUTDOWN)
    async def shutdown(params: Any) -> None:
        await server.cancel_all_turns()

    async def session_new(p: wire.SessionNewParams) -> wire.SessionNewResult:
        settings = settings_for(server, p.workspace)
        policy = PermissionPolicy.from_settings(settings, p.permission_mode)
        options = SessionOptions(fallback_model=p.fallback_model, thinking_budget=p.thinking_budget,
                                 summary_model=p.summary_model, compact_model=p.compact_model,
                                 effort=p.effort)
        s = server.sessions.new(p.workspace, p.model or settings.settings.model
                                or server.default_model, policy, p.system_prompt, options,
                                server.defaults_for(settings),
                                mode_from_settings=not p.permission_mode)
        s.cache = settings.settings.cache
        s.editor = settings.settings.editor
        log.info("session %s on %s (model %s, mode %s, %d rules)", s.id, s.workspace, s.model,
                 policy.mode, len(policy.rules))
        await start_mcp(s, settings)
        result = wire.SessionNewResult(session_id=s.id, workspace=str(s.workspace),
                                       model=s.model, permission_mode=s.policy.mode,
                                       warnings=settings.warnings + convert.mcp_warnings(s.mcp),
                                       untrusted_settings=convert.untrusted(settings.untrusted),
                                       mcp_servers=convert.mcp_servers(s.mcp),
                                       instructions=convert.instructions(listed(s.briefing)))
        watch_mcp(server, s)
        return result

    async def turn_start(p: wire.TurnStartParams) -> wire.TurnStartResult:
        session = server.sessions.get(p.session_id)
        emitters: list[TurnEmitter] = []
        kept = TranscriptOutput()

        def send(params: TurnEventParams) -> None:
            if session.transcript is not None and kept.keep(params.turn_id, params.event):
                session.transcript.event(params.turn_id, params.event)
            server.protocol.notify_struct("turn/event", params)

        def emit_for(turn_id: str) -> TurnEmitter:
            emitter = TurnEmitter(session.id, turn_id, send)
            emitter.started(p.prompt, session.model)
            emitters.append(emitter)
            return emitter

        request = TurnRequest(p.prompt, convert.context_items(p.context), p.max_turns,
                              p.token_budget, p.task_budget, p.if_busy)
        turn_id, terminal = await start_turn(
            session, request, server.turn_deps, emit_for,
            lambda turn_id: _asker(server, session, turn_id), request_id=server.protocol.msg_id)
        for emitter in emitters:
            if emitter.turn_id == turn_id:
                emitter(TurnEnded(terminal.reason, terminal.usage, terminal.error))
            emitter.flush()
        log.info("turn %s ended: %s", turn_id, terminal.reason.value)
        return convert.turn_result(turn_id, terminal)

    async def session_list(p: wire.SessionListParams) -> wire.SessionListResult:
        return wire.SessionListResult(sessions=[convert.session_info(i) for i in
                                                server.sessions.list(p.workspace)])

    async def session_compact(p: wire.SessionCompactParams) -> wire.SessionCompactResult:
        session = server.sessions.get(p.session_id)
        before, after, summary = await compact_session(session, server.turn_deps)
        log.info("session %s compacted: %d -> %d tokens", session.id, before, after)
        return wire.SessionCompactResult(tokens_before=before, tokens_after=after, summary=summary)

    async def session_load(p: wire.SessionLoadParams) -> wire.SessionLoadResult:
        read: list[LoadedSettings] = []  # stays empty when the session was live already
        await server.sessions.settled(p.session_id)

        def policy_for(mode: str | None, workspace: str) -> PermissionPolicy:
            read.append(settings_for(server, workspace))
            return PermissionPolicy.from_settings(read[-1], mode)

        session, loaded = server.sessions.load(p.session_id, policy_for, server.session_options())
        settings = read[-1] if read else None
        if settings is not None:  # the settings' fallback model, read with the session's folder
            session.options = session.options.over(server.defaults_for(settings))
            session.cache = settings.settings.cache
            session.editor = settings.settings.editor
            await start_mcp(session, settings)
        seqs: dict[str, int] = {}
        for turn_id, event in loaded.events:
            seq = seqs[turn_id] = seqs.get(turn_id, -1) + 1
            server.protocol.send_raw({"jsonrpc": "2.0", "method": "turn/event", "params": {
                "sessionId": session.id, "turnId": turn_id, "seq": seq, "event": event}})
        result = wire.SessionLoadResult(
            session_id=session.id, workspace=str(session.workspace), model=session.model,
            permission_mode=session.policy.mode, turns=loaded.turns, title=loaded.title,
            warnings=loaded.warnings + (settings.warnings if settings else [])
            + convert.mcp_warnings(session.mcp),
            untrusted_settings=convert.untrusted(settings.untrusted if settings else None),
            mcp_servers=convert.mcp_servers(session.mcp),
            instructions=convert.instructions(listed(session.briefing)))
        watch_mcp(server, session)
        return result

    async def session_close(p: wire.SessionCloseParams) -> wire.SessionCloseResult:
        stopped = await server.sessions.close(p.session_id)
        log.info("session %s closed (%d MCP servers stopped)", p.session_id, stopped)
        return wire.SessionCloseResult(session_id=p.session_id, mcp_servers_stopped=stopped)

    async def session_configure(p: wire.SessionConfigureParams) -> wire.SessionConfigureResult:
        session = server.sessions.get(p.session_id)
        configure(session, p.permission_mode, p.model)
        log.info("session %s configured: model %s, mode %s", session.id, session.model,
                 session.policy.mode)
        return wire.SessionConfigureResult(session_id=session.id, model=session.model,
                                           permission_mode=session.policy.mode)

    async def turn_cancel(p: wire.TurnCancelParams) -> None:
        session = server.sessions.get(p.session_id)
        turn = session.turn
        if turn is not None and (p.turn_id is None or p.turn_id == turn.id):
            log.info("cancelling turn %s (turn/cancel)", turn.id)
            turn.cancel()

    handler(server, "session/new", session_new)
    handler(server, "turn/start", turn_start)
    handler(server, "session/list", session_list)
    handler(server, "session/load", session_load)
    handler(server, "session/compact", session_compact)
    handler(server, "session/configure", session_configure)
    handler(server, "session/close", session_close)
    handler(server, "turn/cancel", turn_cancel)


async def start_mcp(session: Session, settings: LoadedSettings) -> None:
    """Start the MCP servers the settings give `session` (none: nothing is imported)."""
    configs = mcp_config.from_settings(settings)
    if configs:
        bound = settings.settings.mcp.startup_timeout  # 0: answer without waiting for them
        session.mcp = await start_servers(configs, session.workspace,
                                          STARTUP_BOUND if bound is None else bound)


def watch_mcp(server: Daemon, session: Session) -> None:
    """From the result on (which says how the servers are now), each change of an MCP server
    of `session` reaches the client as `mcpServer/changed`. Called by the handler that answers
    with that result: a change until the answer is out waits for it (pygls sends the answer
    from a done callback of the handler's task added before this one), so the client never
    hears of a session it has not been given yet."""
    if session.mcp is None:
        return
    held: list | None = []

    def tell(change) -> None:
        if held is not None:
            held.append(change)
        else:
            server.protocol.notify_struct("mcpServer/changed",
                                          convert.mcp_change(session.id, change))

    def answered(_task) -> None:
        nonlocal held
        waiting, held = held or [], None
        for change in waiting:
            tell(change)

    session.mcp.watch(tell)
    asyncio.current_task().add_done_callback(answered)


def _asker(server: Daemon, session: Session, turn_id: str):
    async def ask(prompt: PermissionPrompt) -> PermissionAnswer:
        if not server.client_answers_permissions:
            return PermissionAnswer("reject", reason="the editor cannot answer permission "
                                    "requests" + ("" if prompt.loop else f", and mode "
                                                  f"{session.policy.mode} requires asking"))
        params = convert.permission_params(session.id, turn_id, prompt)
        try:
            raw = await server.protocol.request("permission/request", params,
                                                server.permission_timeout)
        except TimeoutError:
            return PermissionAnswer("reject", reason=f"no answer within "
                                    f"{server.permission_timeout:g} s")
        except JsonRpcException as exc:
            return PermissionAnswer("reject", reason=f"the editor answered with an error: {exc}")
        try:
            answer = msgspec.convert(raw, wire.PermissionRequestResult)
            return convert.permission_answer(answer, prompt.preview)
        except (msgspec.ValidationError, convert.PermissionAnswerInvalid) as exc:
            return PermissionAnswer("reject", reason=f"the editor's answer was invalid: {exc}")
    return ask
