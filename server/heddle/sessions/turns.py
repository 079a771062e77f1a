"""Running one turn of a session: the cancel scope, the tool task group, the loop, the result."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from typing import Callable

import anyio

from heddle.loop.events import CoreEvent, Terminal, TerminalReason, Usage
from heddle.loop.messages import TextBlock, append_user
from heddle.loop.prompt import ContextItem, system_prompt, user_prompt
from heddle.loop.query import INTERRUPTED, LoopDeps, QueryParams, drive, query
from heddle.model.types import ModelCaller
from heddle.permissions.policy import Asker
from heddle.sessions.session import RunningTurn, Session, SessionError
from heddle.tools.base import Tool, ToolContext

SECRET_MARKERS = ("API_KEY", "APIKEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")
DEFAULT_MAX_TURNS = 100


def tool_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for processes tools start: the daemon's, without secrets."""
    environ = os.environ if environ is None else environ
    return {k: v for k, v in environ.items()
            if not any(marker in k.upper() for marker in SECRET_MARKERS)}


@dataclass(frozen=True)
class TurnDeps:
    model_for: Callable[[str], ModelCaller]
    tools: dict[str, Tool]
    new_id: Callable[[], str] = field(default=lambda: uuid.uuid4().hex)
    max_tokens: int = 8192


async def run_turn(session: Session, prompt: str, context: list[ContextItem], deps: TurnDeps,
                   emit: Callable[[CoreEvent], None], asker: Asker,
                   turn_id: str, max_turns: int | None = None,
                   request_id: object = None) -> Terminal:
    """Run `prompt` to a Terminal and commit the conversation to the session."""
    if session.turn is not None:
        raise SessionError("busy", f"session {session.id} is already running turn "
                                   f"{session.turn.id}; cancel it or wait for it to end")
    turn = RunningTurn(turn_id, anyio.CancelScope(), request_id=request_id)
    session.turn = turn
    messages = append_user(session.messages, (TextBlock(user_prompt(prompt, context)),))
    ctx = ToolContext(session.workspace, emit=emit, env=tool_env())
    terminal: Terminal | None = None
    try:
        with turn.scope:
            async with anyio.create_task_group() as tg:
                params = QueryParams(
                    messages=messages, system=system_prompt(session.workspace, session.system_extra),
                    model=session.model, tools=deps.tools, tool_context=ctx,
                    policy=session.policy, asker=asker,
                    deps=LoopDeps(deps.model_for(session.model), deps.new_id),
                    task_group=tg, max_turns=max_turns or DEFAULT_MAX_TURNS,
                    max_tokens=deps.max_tokens, permission_lock=session.permission_lock)
                terminal = await drive(query(params), emit)
        if terminal is None:  # cancelled before the loop could report
            terminal = Terminal(TerminalReason.ABORTED_STREAMING,
                                append_user(messages, (TextBlock(INTERRUPTED),)), Usage())
        session.messages = terminal.messages
        session.turns_run += 1
        return terminal
    finally:
        session.turn = None
        turn.done.set()
