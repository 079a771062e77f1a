"""Conversions between core values and wire types: the one place they meet."""

from __future__ import annotations

import msgspec

import heddle_protocol as wire
from heddle_protocol import events as wev
from heddle.core import events as core
from heddle.loop.prompt import ContextItem
from heddle.core.hunks import HunkDecision, check, outcomes, rejection_message
from heddle.briefing.instructions import InstructionFile
from heddle.mcp.servers import McpServers, ServerChange, ServerStatus
from heddle.permissions.policy import PermissionAnswer, PermissionPrompt, Rule
from heddle.settings import Untrusted


def error_info(e: core.ErrorInfo | None) -> wire.ErrorInfo | None:
    return None if e is None else wire.ErrorInfo(e.code, e.message, e.status, e.retryable)


def usage(u: core.Usage) -> wire.Usage:
    return wire.Usage(input_tokens=u.input_tokens, output_tokens=u.output_tokens,
                      cache_read_input_tokens=u.cache_read_input_tokens,
                      cache_creation_input_tokens=u.cache_creation_input_tokens,
                      model_calls=u.model_calls)


def preview(p: core.Preview | None, texts: bool = True
            ) -> wire.Preview | None:
    """The wire preview; `texts=False`: a diff's path and diff only (for events and
    transcripts, which need not hold whole files)."""
    if isinstance(p, core.DiffPreview) and not texts:
        return wire.DiffPreview(path=p.path, diff=p.diff)
    if isinstance(p, core.DiffPreview):
        return wire.DiffPreview(path=p.path, diff=p.diff, before=p.before, after=p.after,
                                hunks=[wire.DiffHunk(
                                    index=h.index, old_start=h.old_start, old_lines=h.old_lines,
                                    new_start=h.new_start, new_lines=h.new_lines, diff=h.diff)
                                    for h in p.hunks] if p.before is not None else None)
    if isinstance(p, core.CommandPreview):
        return wire.CommandPreview(command=p.command, cwd=p.cwd)
    if isinstance(p, core.PlanPreview):
        return wire.PlanPreview(plan=p.plan)
    return None


def event(ev: core.CoreEvent) -> wev.Ev | None:
    """The wire event for a core event, or None for events clients do not see."""
    match ev:
        case core.TextDelta(text):
            return wev.TextDeltaEvent(text=text)
        case core.ThinkingDelta(text):
            return wev.ThinkingDeltaEvent(text=text)
        case core.ToolCallStarted(call_id, tool):
            return wev.ToolCallStartedEvent(tool_call_id=call_id, tool=tool)
        case core.ToolCallInput(call_id, tool, inp, title):
            return wev.ToolCallInputEvent(tool_call_id=call_id, tool=tool, input=inp, title=title)
        case core.ToolCallFinished(call_id, tool, status, summary, diff, _, exit_code, sig):
            return wev.ToolCallFinishedEvent(tool_call_id=call_id, tool=tool, status=status,
                                             summary=summary, diff=diff, exit_code=exit_code,
                                             signal=sig)
        case core.PermissionAsked(call_id, title, prev):
            return wev.PermissionAskedEvent(tool_call_id=call_id, title=title,
                                           preview=preview(prev, texts=False))
        case core.PermissionAnswered(call_id, decision, rule, reason, scope, hunks, edited):
            return wev.PermissionAnsweredEvent(
                tool_call_id=call_id, decision=decision, rule=rule, reason=reason, scope=scope,
                hunks=[wev.HunkOutcome(index=h.index, decision=h.decision, message=h.message)
                       for h in hunks] or None, edited=edited or None)
        case core.TodoUpdate(todos):
            return wev.TodoEvent(todos=[todo_item(t) for t in todos])
        case core.Retry(attempt, max_attempts, delay_ms, err):
            return wev.RetryEvent(attempt=attempt, max_attempts=max_attempts, delay_ms=delay_ms,
                                  error=error_info(err))
        case core.UsageReport(u, context_tokens, context_window, token_budget):
            return wev.UsageEvent(usage=usage(u), context_tokens=context_tokens,
                                  context_window=context_window, token_budget=token_budget)
        case core.ModelCallStarted(index, model):
            return wev.ModelCallEvent(index=index, model=model)
        case core.Tombstone(index, reason):
            return wev.TombstoneEvent(index=index, reason=reason)
        case core.ModelFallback(from_model, to_model, err):
            return wev.ModelFallbackEvent(from_model=from_model, to_model=to_model,
                                          error=error_info(err))
        case core.Compaction(layer, before, after, summary, _):
            return wev.CompactionEvent(layer=layer, tokens_before=before, tokens_after=after,
                                       summary=summary)
        case core.AgentEvent(call_id, agent, inner):
            nested = event(inner)
            return None if nested is None else wev.AgentEventEvent(
                tool_call_id=call_id, agent=agent, event=nested)
        case core.TurnEnded(reason, u, err):
            wire_reason, phase = _REASONS[reason]
            return wev.TurnEndedEvent(reason=wire_reason, usage=usage(u), cancel_phase=phase,
                                      error=error_info(err))
        case core.ToolSummary(ids, summary):
            return wev.ToolSummaryEvent(tool_call_ids=list(ids), summary=summary)
        case core.ErrorReport(err):
            return wev.ErrorEvent(error=error_info(err))
        case core.ModeChanged(mode):
            return wev.ModeChangedEvent(mode=mode)
        case core.LoopDetected(call_id, tool, count, cycle, description):
            return wev.LoopDetectedEvent(tool_call_id=call_id, tool=tool, count=count,
                                         cycle=list(cycle), description=description)
    return None


_REASONS = {
    core.TerminalReason.COMPLETED: ("completed", None),
    core.TerminalReason.ABORTED_STREAMING: ("cancelled", "streaming"),
    core.TerminalReason.ABORTED_TOOLS: ("cancelled", "tools"),
    core.TerminalReason.MAX_TURNS: ("maxTurns", None),
    core.TerminalReason.PROMPT_TOO_LONG: ("promptTooLong", None),
    core.TerminalReason.MODEL_ERROR: ("modelError", None),
    core.TerminalReason.BLOCKING_LIMIT: ("blockingLimit", None),
    core.TerminalReason.STOP_HOOK_PREVENTED: ("stopHookPrevented", None),
    core.TerminalReason.HOOK_STOPPED: ("hookStopped", None),
    core.TerminalReason.TOKEN_BUDGET: ("tokenBudget", None),
    core.TerminalReason.LOOP_DETECTED: ("loopDetected", None),
}


def turn_result(turn_id: str, t: core.Terminal) -> wire.TurnStartResult:
    reason, phase = _REASONS[t.reason]
    return wire.TurnStartResult(turn_id=turn_id, reason=reason, cancel_phase=phase,
                                usage=usage(t.usage), error=error_info(t.error), text=t.text,
                                transitions=list(t.transitions))


def context_items(items: list[wire.ContextItem]) -> list[ContextItem]:
    return [ContextItem(i.path, i.text, i.range.start_line if i.range else None,
                        i.range.end_line if i.range else None, i.language) for i in items]


def todo_item(t: core.TodoItem) -> wev.TodoItem:
    status = "inProgress" if t.status == "in_progress" else t.status
    return wev.TodoItem(content=t.content, status=status, active_form=t.active_form)


def untrusted(u: Untrusted | None) -> wire.UntrustedSettings | None:
    return None if u is None else wire.UntrustedSettings(
        settings_file=str(u.file), sha256=u.sha256, ignored=list(u.ignored))


def instructions(files: list[InstructionFile]) -> list[wire.InstructionFileInfo]:
    return [wire.InstructionFileInfo(path=str(f.path), scope=f.scope,  # type: ignore[arg-type]
                                     bytes=f.size, truncated=f.truncated) for f in files]


def mcp_servers(servers: McpServers | None) -> list[wire.McpServerInfo]:
    return [] if servers is None else [mcp_server(s) for s in servers.status()]


def mcp_server(s: ServerStatus) -> wire.McpServerInfo:
    return wire.McpServerInfo(name=s.name, transport=s.transport, source=s.source,  # type: ignore[arg-type]
                              state=s.state, tools=list(s.tools), error=s.error,
                              restarts=s.restarts)


def mcp_change(session_id: str, c: ServerChange) -> wire.McpServerChangedParams:
    return wire.McpServerChangedParams(
        session_id=session_id, server=mcp_server(c.status), message=c.message,
        stderr=list(c.stderr),
        restart_in_ms=None if c.restart_in is None else round(c.restart_in * 1000))


def mcp_warnings(servers: McpServers | None) -> list[str]:
    """A warning per MCP server that could not be started, for the result's `warnings` (which
    every client shows): otherwise its tools would just be missing, unexplained."""
    if servers is None:
        return []
    return [f"MCP server {s.name} could not be started ({s.error}); its tools are not offered "
            "in this session" for s in servers.status() if s.state == "failed"]


LOOP_GO_ON, LOOP_STOP = "Let it go on", "Stop the turn"
"""The two answers to the repeat guard's question."""


def rule(r: Rule) -> wire.PermissionRule:
    return wire.PermissionRule(rule=r.pattern, kind=r.kind, scope=r.scope)


PLAN_OPTIONS = [
    wire.PermissionOption(decision="allowOnce", label="Approve, and ask before each edit",
                          mode="default"),
    wire.PermissionOption(decision="allowOnce", label="Approve, and accept edits",
                          mode="acceptEdits"),
    wire.PermissionOption(decision="reject", label="Keep planning (with feedback)"),
]
"""A plan's options: approve and go on in `default` or `acceptEdits`, or reject."""


def permission_params(session_id: str, turn_id: str, p: PermissionPrompt) -> wire.PermissionRequestParams:
    if p.loop:
        return wire.PermissionRequestParams(
            session_id=session_id, turn_id=turn_id, tool_call_id=p.tool_call_id, tool=p.tool,
            input=msgspec.to_builtins(p.input), title=p.title, loop=True, options=[
                wire.PermissionOption(decision="allowOnce", label=LOOP_GO_ON),
                wire.PermissionOption(decision="reject", label=LOOP_STOP)])
    return wire.PermissionRequestParams(
        session_id=session_id, turn_id=turn_id, tool_call_id=p.tool_call_id, tool=p.tool,
        input=msgspec.to_builtins(p.input), title=p.title, preview=preview(p.preview),
        options=list(PLAN_OPTIONS) if isinstance(p.preview, core.PlanPreview) else [
            wire.PermissionOption(decision="allowOnce", label="Allow once"),
            *([wire.PermissionOption(decision="allowAlways", label=f"Always allow {p.rule}",
                                     rule=p.rule)] if p.rule else []),
            wire.PermissionOption(decision="reject", label="Reject"),
        ])


def permission_answer(answer: wire.PermissionRequestResult,
                      offered: core.Preview | None) -> PermissionAnswer:
    """The core answer for a client's; PermissionAnswerInvalid when its hunks or finalText do
    not fit what was offered. Every hunk rejected is a rejection."""
    decisions = [HunkDecision(h.index, h.decision, h.message) for h in answer.hunks or []]
    diff = offered if isinstance(offered, core.DiffPreview) else None
    if answer.decision != "reject":
        if answer.final_text is not None and (diff is None or diff.after is None):
            raise PermissionAnswerInvalid("finalText answers a request whose preview has no "
                                          "`after`")
        problem = check(diff.hunks if diff else (), decisions) if decisions else None
        if problem is not None:
            raise PermissionAnswerInvalid(problem)
        if (diff is not None and diff.hunks and answer.final_text is None and all(
                d.decision == "reject" for d in outcomes(diff.hunks, decisions))):
            return PermissionAnswer("reject", message=rejection_message(decisions),
                                    hunks=tuple(decisions))
    return PermissionAnswer(answer.decision, answer.rule, answer.message, scope=answer.scope,
                            hunks=tuple(decisions), final_text=answer.final_text,
                            mode=answer.mode)


class PermissionAnswerInvalid(ValueError):
    """A client's permission answer that does not fit its request."""


def _iso(epoch: float) -> str:
    import datetime
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).isoformat(timespec="seconds")


def session_info(i) -> wire.SessionInfo:
    reason = None
    if i.last_reason is not None:
        reason = _REASONS.get(core.TerminalReason(i.last_reason), (None, None))[0]
    return wire.SessionInfo(session_id=i.id, title=i.title, workspace=i.workspace, model=i.model,
                            created_at=_iso(i.created_at), updated_at=_iso(i.updated_at),
                            turns=i.turns, live=i.live, last_reason=reason)
