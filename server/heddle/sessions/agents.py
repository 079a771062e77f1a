"""Sub-agents for the Task tool: a nested loop with source `agent:<name>`, read-only tools,
and only its tool activity forwarded to the editor, under the Task call."""

from __future__ import annotations

from typing import Callable

import anyio

from heddle.core import events as ev
from heddle.core.events import CoreEvent, Terminal, TerminalReason
from heddle.core.messages import Message, TextBlock, tool_uses
from heddle.core.tools import CURRENT_CALL, ToolContext, ToolOutput
from heddle.loop.deps import LoopDeps
from heddle.loop.executor import Toolbox
from heddle.loop.params import LoopConfig, LoopRuntime
from heddle.loop.query import drive, query
from heddle.sessions.briefs import AgentBrief
from heddle.tools.agent import AGENT_MAX_TURNS, AGENT_TOOLS

AGENT_SYSTEM = """You are a research sub-agent of Heddle, a coding agent, working in the
workspace {workspace}. You can read and search files but not change them or run commands.
Do the task you are given thoroughly, then answer with a concise, specific report (paths, line
numbers, names): it is all the main agent will see of your work."""

FORWARDED = (ev.ToolCallStarted, ev.ToolCallInput, ev.ToolCallFinished, ev.PermissionAsked,
             ev.PermissionAnswered, ev.Retry, ev.ErrorReport, ev.ToolOutputChunk)


def agent_runner(config: LoopConfig, deps: LoopDeps, toolbox: Toolbox,
                 context: Callable[..., ToolContext], emit: Callable[[CoreEvent], None],
                 brief: AgentBrief | None = None):
    """`run_agent(name, prompt)` for the Task tool of the query that runs with `config`, `deps`
    and `toolbox`: the same model, permissions and compactor, read-only tools; `brief`: the
    session's environment and instructions, before the task (None: the task alone)."""

    async def run_agent(name: str, prompt: str) -> ToolOutput:
        call_id = CURRENT_CALL.get()

        def forward(event: CoreEvent) -> None:
            if isinstance(event, FORWARDED):
                emit(ev.AgentEvent(call_id, name, event))

        tools = {n: t for n, t in toolbox.tools.items() if n in AGENT_TOOLS}
        sub = LoopConfig(system=AGENT_SYSTEM.format(workspace=toolbox.ctx.workspace),
                         model=config.model, source=f"agent:{name}", max_turns=AGENT_MAX_TURNS,
                         max_tokens=config.max_tokens, limits=config.limits,
                         pipeline=config.pipeline, cache_ttl=config.cache_ttl,
                         limits_for=config.limits_for, repeats=config.repeats,
                         thinking=config.thinking)
        ctx = context(forward, None)
        ctx.on_file = brief.on_file() if brief is not None else None
        seams = LoopDeps(deps.model, Toolbox(tools, ctx, toolbox.asker, toolbox.permission_lock),
                         deps.permissions, compactor=deps.compactor)
        task = Message("user", (brief.opening if brief else ()) + (TextBlock(prompt),))
        async with anyio.create_task_group() as tg:
            terminal = await drive(query((task,), sub, seams,
                                         LoopRuntime(tg, emit=forward)), forward)
        calls = sum(len(tool_uses(m)) for m in terminal.messages if m.role == "assistant")
        spent = terminal.usage.prompt_tokens + terminal.usage.output_tokens
        summary = f"{calls} tool call{'' if calls == 1 else 's'}, {spent:,} tokens"
        if terminal.reason is TerminalReason.COMPLETED and terminal.text.strip():
            return ToolOutput(terminal.text, summary)
        return ToolOutput(f"The sub-agent stopped before answering: {why(terminal)}.", summary,
                          is_error=True)

    return run_agent


def why(terminal: Terminal) -> str:
    """Why a sub-agent ended without an answer, for the parent model to read."""
    reason, error = terminal.reason, terminal.error
    if reason in (TerminalReason.ABORTED_STREAMING, TerminalReason.ABORTED_TOOLS):
        return "the user cancelled the turn"
    if reason is TerminalReason.MAX_TURNS:
        return f"it reached its limit of {AGENT_MAX_TURNS} model calls"
    if reason in (TerminalReason.MODEL_ERROR, TerminalReason.PROMPT_TOO_LONG) and error:
        return f"its model call failed ({error.message})"
    if error is not None:
        return error.message
    return "it ended without writing a report"
