"""Running turns of a session: one at a time, with new prompts rejected, interrupting or queued.

`start_turn` is what the daemon calls for `turn/start`. A session runs one turn at a time; a
prompt for a busy session is refused (`reject`), replaces the running turn (`interrupt`: the
turn is cancelled without an interruption note, since the new prompt carries the context), or
waits (`queue`): the running turn takes it in at its next step, and it counts as answered only
if that turn completes; otherwise it runs as a turn of its own.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable, Literal, Mapping

import anyio
import anyio.lowlevel

from heddle.briefing.gather import BOUND
from heddle.context.compactor import CompactResult, Compactor
from heddle.context.pipeline import CircuitBreaker, PipelineSettings, compact_now, tokens_of
from heddle.context.windows import Limits, estimate_tokens
from heddle.core.events import (Compaction, CoreEvent, MessageFinal, ModeChanged,
                                ModelCallStarted, Terminal, TerminalReason, ThinkingDone,
                                ToolCallFinished, ToolOutputChunk, Usage)
from heddle.core.messages import Block, Message, TextBlock, append_user
from heddle.core.stream import ModelCaller
from heddle.core.tools import Tool, ToolContext
from heddle.loop.budget import parse_budget
from heddle.loop.compact import ModelCompactor, Prefix
from heddle.loop.deps import LoopDeps
from heddle.loop.endings import INTERRUPTED
from heddle.loop.executor import Toolbox
from heddle.loop.hooks import StopHooks
from heddle.loop.params import LoopConfig, LoopRuntime, Outlet
from heddle.loop.prompt import ContextItem, system_prompt, user_prompt
from heddle.loop.repeats import RepeatLimits
from heddle.model.caching import LIFETIME_SECONDS
from heddle.model.limits import model_limits
from heddle.loop.query import drive, query
from heddle.loop.thinking import ThinkingChoice
from heddle.permissions.hooks import HookRunner
from heddle.permissions.policy import Asker
from heddle.processes.environment import tool_env
from heddle.sessions.agents import agent_runner
from heddle.sessions.briefs import AgentBrief, file_hook, opening
from heddle.sessions.retention import session_results_dir
from heddle.sessions.session import QueuedPrompt, RunningTurn, Session, SessionError
from heddle.sessions.stop_hooks import CommandStopHooks
from heddle.sessions.transcript import TranscriptWriter, sessions_dir
from heddle.tools.base import schema_of
from heddle.tools.diagnostics import DEFAULT_WAIT
from heddle.tools.plan import ended_note, plan_note
from heddle.settings import CacheSettings, ModelLimitSettings

log = logging.getLogger(__name__)

DEFAULT_MAX_TURNS = 100
LIGHT_LAYERS = ("snip", "microcompact")
QUEUED_NOTE = "[The user sent this while you were working]\n"

IfBusy = Literal["reject", "interrupt", "queue"]
CompactionStatus = Literal["in_progress", "completed", "failed", "cancelled"]


@dataclass(frozen=True)
class CompactionNote:
    """One step of a model compaction: its id (the same from start to end), its status, and,
    once it is over, the summary (completed) or what went wrong (failed)."""

    compaction_id: str
    status: CompactionStatus
    reason: str
    """The pipeline's layer: `auto` (also for `compact_session`), `collapse`, `reactive`."""
    summary: str = ""
    error: str = ""
    tokens_before: int = 0
    tokens_after: int = 0


CompactionListener = Callable[[Session, CompactionNote], None]


@dataclass(frozen=True)
class TurnDeps:
    model_for: Callable[[str], ModelCaller]
    tools: dict[str, Tool]
    new_id: Callable[[], str]
    max_tokens: int = 8192
    limits_for: Callable[[str, Mapping[str, ModelLimitSettings]], Limits] | None = None
    """A model's limits, given the settings' `[models]` entries; None: the built-in table's."""
    cache: CacheSettings = CacheSettings(prompt_cache=True, ttl="5m", context_editing=False)
    """The daemon's prompt-cache defaults (a session's settings files may override them)."""
    compactions: CompactionListener | None = None
    """Told when each of a session's model compactions starts and how it ends (a door that
    shows them); None: nobody is."""
    diagnostics_wait: float = DEFAULT_WAIT
    """The daemon's default for `[editor] diagnostics_wait` (`HEDDLE_DIAGNOSTICS_WAIT`)."""
    environment_bound: float = BOUND
    """Seconds a session's first model call waits for its environment block (git facts not
    ready by then are left out)."""


@dataclass(frozen=True)
class TurnRequest:
    prompt: str
    context: list[ContextItem]
    max_turns: int | None = None
    token_budget: int | None = None
    task_budget: int | None = None
    if_busy: IfBusy = "reject"


async def start_turn(session: Session, request: TurnRequest, deps: TurnDeps,
                     emit_for: Callable[[str], Callable[[CoreEvent], None]], asker_for,
                     request_id: object = None) -> tuple[str, Terminal]:
    """Run (or queue) a prompt; returns the id of the turn that answered it and its Terminal."""
    text = user_prompt(request.prompt, request.context)
    if not text.strip():  # the model would answer 400 for an empty message
        raise SessionError("prompt", "the prompt is empty: it needs some text")
    too_big(text, session, deps)
    session.expect_open()
    if session.compacting:  # (whatever ifBusy says: it is no turn to queue behind or cancel)
        raise SessionError("compacting", f"session {session.id} is being compacted")
    if session.turn is not None:
        if request.if_busy == "reject":
            raise SessionError("busy", f"session {session.id} is already running turn "
                               f"{session.turn.id}")  # each door says how to go on
        if request.if_busy == "interrupt":
            while session.turn is not None:
                running = session.turn
                running.cancel("interrupt")
                await running.done.wait()
        else:
            queued = QueuedPrompt(text)
            session.queue.append(queued)
            while True:
                if queued.state == "answered":
                    return queued.answered_by
                if session.turn is None:
                    session.queue.remove(queued)
                    break
                await session.turn.done.wait()
    turn_id = deps.new_id()
    terminal = await _run(session, turn_id, text, request, deps, emit_for(turn_id),
                          asker_for(turn_id), request_id)
    return turn_id, terminal


async def _run(session: Session, turn_id: str, text: str, request: TurnRequest, deps: TurnDeps,
               emit: Callable[[CoreEvent], None], asker: Asker, request_id: object) -> Terminal:
    turn = RunningTurn(turn_id, anyio.CancelScope(), request_id=request_id)
    session.turn = turn  # claimed before any await, so two waiters can never both start
    try:
        opening, agent_brief = await briefs_of(session, deps.environment_bound)
    except BaseException:
        session.turn = None
        turn.done.set()
        raise
    prompt = Message("user", opening + mode_notes(session) + (TextBlock(text),))
    messages = append_user(session.messages, prompt.content)
    outlet = emit if isinstance(emit, Outlet) else None
    transcript = session.transcript
    if transcript is not None:
        transcript.turn(turn_id, request.prompt)
        transcript.message(turn_id, prompt)
        emit = _recording(emit, transcript, turn_id)
    taken: list[QueuedPrompt] = []

    def take_queued() -> tuple[Block, ...]:
        fresh = [q for q in session.queue if q.state == "pending"]
        for q in fresh:
            q.state = "started"
        taken.extend(fresh)
        return tuple(TextBlock(QUEUED_NOTE + q.text) for q in fresh)

    model = deps.model_for(session.model)
    compactor = compactor_of(session, deps)
    terminal: Terminal | None = None
    try:
        with turn.scope:
            async with anyio.create_task_group() as tg:
                on_file = (file_hook(session.briefing.instructions, session.briefing.folders)
                           if session.briefing is not None else None)

                def context(sink, run_agent, seen=None) -> ToolContext:
                    # a sub-agent's reads are its own: the agent never saw what it read
                    return ToolContext(
                        session.workspace, emit=sink,
                        env=tool_env(pass_env=session.policy.pass_env),
                        session_id=session.id, documents=session.documents,
                        diagnostics_wait=deps.diagnostics_wait
                        if session.editor.diagnostics_wait is None
                        else session.editor.diagnostics_wait,
                        outside_allowed=lambda tool, path: session.policy.allows_outside(
                            tool, path, session.workspace),
                        results_dir=session_results_dir(sessions_dir(), session.id),
                        run_agent=run_agent, permission_mode=lambda: session.policy.mode,
                        seen={} if seen is None else seen, on_file=on_file)

                toolbox = Toolbox(tools_of(session, deps), context(emit, None, session.seen),
                                  asker, session.permission_lock)
                config = loop_config(session, request, deps)
                seams = LoopDeps(model, toolbox, session.policy, compactor=compactor,
                                 stop_hooks=stop_hooks_of(session, emit), loop_asker=asker)
                run = LoopRuntime(tg, emit=emit, outlet=outlet, take_queued=take_queued,
                                  abort_reason=lambda: turn.abort_reason)
                toolbox.ctx.run_agent = agent_runner(config, seams, toolbox, context, emit,
                                                     agent_brief)
                toolbox.ctx.switch_mode = lambda mode: switch_mode(session, mode, emit)
                terminal = await drive(query(messages, config, seams, run), emit)
        if terminal is None:  # cancelled before the loop could report
            tail = () if turn.abort_reason == "interrupt" else (TextBlock(INTERRUPTED),)
            if tail:
                emit(MessageFinal(Message("user", tail)))  # the transcript keeps it too
            terminal = Terminal(TerminalReason.ABORTED_STREAMING,
                                append_user(messages, tail) if tail else messages, Usage())
        session.messages = terminal.messages
        session.turns_run += 1
        session.last_call_at = time.monotonic()
        if transcript is not None:
            transcript.end(turn_id, terminal.reason.value, terminal.usage)
        return terminal
    finally:
        completed = terminal is not None and terminal.reason is TerminalReason.COMPLETED
        # A session being closed starts no other turn: what waits is answered by this one.
        closed = terminal is not None and session.closing is not None
        for q in list(session.queue) if closed else taken:
            if completed or closed:
                q.state, q.answered_by = "answered", (turn_id, terminal)
                session.queue.remove(q)
            else:
                q.state = "pending"
        session.turn = None
        turn.done.set()


def mode_notes(session: Session) -> tuple[Block, ...]:
    """What the turn's user message says about the mode before the prompt: that the session
    plans (every turn in plan mode), or that planning has ended (the first turn after the user
    left plan mode)."""
    mode, told = session.policy.mode, session.mode_told
    session.mode_told = mode
    if mode == "plan":
        return (TextBlock(plan_note()),)
    if told == "plan":
        return (TextBlock(ended_note(mode)),)
    return ()


def switch_mode(session: Session, mode: str, emit: Callable[[CoreEvent], None]) -> None:
    """The user approved a plan and picked `mode`: the rest of the turn and the next ones run
    in it, the transcript keeps it, the editor hears of it, and the model has been told (the
    plan tool's result says so)."""
    session.policy.mode = mode  # type: ignore[assignment]  # checked on the wire
    session.mode_told = mode
    if session.transcript is not None:
        session.transcript.configured(mode, None)
    emit(ModeChanged(mode))


async def briefs_of(session: Session, bound: float = BOUND
                    ) -> tuple[tuple[Block, ...], AgentBrief | None]:
    """The blocks the turn's prompt starts with, and what its sub-agents are told."""
    if session.briefing is None:
        return (), None
    return await opening(session.briefing, session.workspace, session.model, session.messages,
                         bound=bound)


def table_limits(window_override: int = 0
                 ) -> Callable[[str, Mapping[str, ModelLimitSettings]], Limits]:
    """A model's limits as every door gives them to `TurnDeps.limits_for`: the table's, the
    settings' `[models]` entries in their place, and `HEDDLE_CONTEXT_WINDOW` (when set) over
    the window of both."""
    def limits(model: str, overrides: Mapping[str, ModelLimitSettings]) -> Limits:
        found = model_limits(model, overrides)
        return Limits(window_override or found.context_window, found.max_output,
                      found.thinking)
    return limits


def loop_config(session: Session, request: TurnRequest, deps: TurnDeps) -> LoopConfig:
    """What a turn's query runs with: the session's model and options, the request's limits."""
    cache = session.cache.over(deps.cache)
    ttl = cache.ttl or "5m"
    limits_for = session_limits(session, deps)
    return LoopConfig(
        system=system_prompt(session.system_extra), model=session.model,
        max_turns=request.max_turns or DEFAULT_MAX_TURNS, max_tokens=deps.max_tokens,
        fallback_model=session.options.fallback_model,
        token_budget=request.token_budget or parse_budget(request.prompt),
        task_budget=request.task_budget, thinking=thinking_of(session),
        summary_model=session.options.summary_model,
        limits=limits_for(session.model) if limits_for else None, limits_for=limits_for,
        cache_ttl=ttl if cache.prompt_cache else None,
        cache_cold=bool(cache.prompt_cache) and cache_expired(session.last_call_at,
                                                             time.monotonic(), ttl),
        pipeline=PipelineSettings(server_edits=bool(cache.context_editing)),
        repeats=RepeatLimits.from_settings(session.options.loop))


def thinking_of(session: Session) -> ThinkingChoice:
    return ThinkingChoice(session.options.thinking_budget, session.options.effort)


def too_big(text: str, session: Session, deps: TurnDeps) -> None:
    """SessionError `prompt` for a prompt the model's window cannot take even alone: no
    compaction could make room for it, and kept in the conversation it would block every
    later turn."""
    limits_of = session_limits(session, deps)
    if limits_of is not None:
        limits = limits_of(session.model)
    else:
        found = model_limits(session.model)
        limits = Limits(found.context_window, found.max_output)
    size = estimate_tokens(text)
    if size > limits.blocking_at:
        raise SessionError("prompt", f"the prompt is about {size:,} tokens, more than the "
                           f"context window of {session.model} ({limits.window:,}) can take "
                           "with its answer: send less (the agent can read a file itself)")


def session_limits(session: Session, deps: TurnDeps) -> Callable[[str], Limits] | None:
    """Any model's limits as this session's settings describe them; None: the table's."""
    if deps.limits_for is None:
        return None
    found, overrides = deps.limits_for, session.options.model_limits or {}
    return lambda model: found(model, overrides)


def cache_expired(last_call_at: float | None, now: float, ttl: str) -> bool:
    """Whether the prompt cache of a session's last call has surely expired by `now`."""
    return last_call_at is not None and now - last_call_at > LIFETIME_SECONDS[ttl]


def tools_of(session: Session, deps: TurnDeps) -> dict[str, Tool]:
    """The tools a turn of `session` offers: the built-in ones, then its MCP servers' (fixed
    for the turn; a server that became ready since the last turn joins here)."""
    if session.mcp is None:
        return deps.tools
    return {**deps.tools, **session.mcp.tools()}


def stop_hooks_of(session: Session, emit: Callable[[CoreEvent], None] | None = None
                  ) -> StopHooks | None:
    """The session's `hooks.Stop` commands from its settings, if any; their output goes to
    `emit` as it comes, under no tool call."""
    hooks = session.policy.hooks.stop
    if not hooks:
        return None
    output = None if emit is None else (
        lambda stream, data, hook: emit(ToolOutputChunk("", stream, data, hook)))
    return CommandStopHooks(hooks, HookRunner(session.id, session.workspace,
                                              tool_env(pass_env=session.policy.pass_env),
                                              output))


def compactor_of(session: Session, deps: TurnDeps) -> CircuitBreaker:
    """The session's compactor; its circuit breaker counts failures across turns. It sends the
    session's own system prompt and tools, so that its call reads the conversation from the
    prompt cache."""
    if session.compactor is None:
        cache = session.cache.over(deps.cache)
        prefix = Prefix(system_prompt(session.system_extra),
                        tuple(schema_of(t) for t in tools_of(session, deps).values()),
                        (cache.ttl or "5m") if cache.prompt_cache else None,
                        thinking_of(session))
        compactor: Compactor = ModelCompactor(
            deps.model_for(session.model), compact_model=session.options.compact_model,
            prefix=prefix, limits_for=session_limits(session, deps))
        if deps.compactions is not None:
            compactor = _Reported(compactor, session, deps.compactions, deps.new_id)
        session.compactor = CircuitBreaker(compactor)
    return session.compactor


class _Reported:
    """A compactor whose every call is told to a listener: started, then how it ended. Inside
    the circuit breaker, so a compaction the breaker refuses never starts."""

    def __init__(self, compactor: Compactor, session: Session, listener: CompactionListener,
                 new_id: Callable[[], str]):
        self._compactor, self._session, self._listener = compactor, session, listener
        self._new_id = new_id

    def _tell(self, note: CompactionNote) -> None:
        try:
            self._listener(self._session, note)
        except Exception:  # showing it must never break the compaction
            log.exception("a compaction listener failed")

    async def __call__(self, messages: tuple[Message, ...], model: str, reason: str
                       ) -> CompactResult:
        cid = self._new_id()
        self._tell(CompactionNote(cid, "in_progress", reason))
        try:
            try:
                result = await self._compactor(messages, model, reason)
            except Exception:
                # the compactor's own model call ends a cancel as a failure: a cancelled
                # caller is told so here (and the cancel goes on, rather than the failure)
                await anyio.lowlevel.checkpoint_if_cancelled()
                raise
        except Exception as exc:
            self._tell(CompactionNote(cid, "failed", reason, error=str(exc) or repr(exc)))
            raise
        except BaseException:  # cancelled (the turn, `/compact`, or the agent stopping)
            self._tell(CompactionNote(cid, "cancelled", reason))
            raise
        self._tell(CompactionNote(cid, "completed", reason, summary=result.summary,
                                  tokens_before=result.tokens_before,
                                  tokens_after=result.tokens_after))
        return result


async def compact_session(session: Session, deps: TurnDeps, keep_rounds: int = 2
                          ) -> tuple[int, int, str]:
    """Compact an idle session now; returns (tokens before, tokens after, summary)."""
    session.expect_open()
    if session.turn is not None:
        raise SessionError("busy", f"session {session.id} is running turn {session.turn.id}; "
                           "compact it when the turn has ended")
    if session.compacting:
        raise SessionError("compacting", f"session {session.id} is being compacted already")
    before = tokens_of(session.messages)
    session.compacting = True
    try:
        result = await compact_now(session.messages, session.model,
                                   compactor_of(session, deps), keep_rounds)
    except Exception as exc:
        raise SessionError("compact", f"compaction failed: {exc}") from None
    finally:
        session.compacting = False
    if result is None:
        raise SessionError("compact", "nothing to compact yet, or the summary model failed; "
                           "see the log")
    session.messages, summary = result
    if session.transcript is not None:
        session.transcript.compacted("manual", session.messages, summary)
    return before, tokens_of(session.messages), summary


def _recording(emit: Callable[[CoreEvent], None], transcript: TranscriptWriter,
               turn_id: str) -> Callable[[CoreEvent], None]:
    """Write conversation content to the transcript as it becomes final, then pass events on.

    A message names the model call it followed, a tool result is written as its call
    finishes, and a thinking block as it completes: a load after a crash can then tell what of
    the shown output is already in the conversation, keep a finished call's result although
    its batch never completed, and keep a cut-off reply's signed thinking."""
    call: int | None = None

    def record(ev: CoreEvent) -> None:
        nonlocal call
        if isinstance(ev, ModelCallStarted):
            call = ev.index
        elif isinstance(ev, MessageFinal):
            transcript.message(turn_id, ev.message, call)
        elif isinstance(ev, ThinkingDone):
            transcript.thinking(turn_id, ev.block, call, ev.after_tools)
        elif isinstance(ev, ToolCallFinished) and ev.result is not None:
            transcript.tool_result(turn_id, ev.result, ev.status, ev.summary, ev.diff,
                                   ev.exit_code, ev.signal)
        elif isinstance(ev, Compaction) and ev.layer not in LIGHT_LAYERS:
            # snip and microcompact are redone from the full history whenever it is loaded, so
            # only summaries (which cannot be redone) replace the history on disk
            transcript.compacted(turn_id, ev.messages)
        emit(ev)
    return record
