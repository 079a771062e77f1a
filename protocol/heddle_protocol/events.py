"""`turn/event`: the one progress notification, whose `event` is a tagged union on `kind`."""

from __future__ import annotations

from typing import Any, Literal, Union

import msgspec

from heddle_protocol.types import (CancelPhase, ErrorInfo, HunkDecision, PermissionMode,
                                   PermissionOutcome, Preview,
                                   RuleScope, TerminalReason, Usage, Wire)


class Ev(Wire, tag_field="kind"):
    """Base of event payloads; the tag is the camelCase class name without `Event`."""


class TurnStartedEvent(Ev, tag="turnStarted"):
    prompt: str
    model: str


class TextDeltaEvent(Ev, tag="textDelta"):
    text: str
    """May hold several coalesced model deltas."""


class ThinkingDeltaEvent(Ev, tag="thinkingDelta"):
    text: str


class ToolCallStartedEvent(Ev, tag="toolCallStarted"):
    """The model began a tool call; its input is still streaming."""

    tool_call_id: str
    tool: str


class ToolCallInputEvent(Ev, tag="toolCallInput"):
    """The tool call's input is complete."""

    tool_call_id: str
    tool: str
    input: dict[str, Any]
    title: str
    """One human line naming the call, e.g. `Read src/app.py`; a Bash call's `description`
    when the model gave one, else `Run: <the command's first line>`."""


ToolStatus = Literal["ok", "error", "rejected", "cancelled"]


class ToolCallFinishedEvent(Ev, tag="toolCallFinished"):
    tool_call_id: str
    tool: str
    status: ToolStatus
    summary: str
    """One line: `42 lines`, `exit 0`, `1 replacement`, or the error message."""
    diff: str | None = None
    """For edits that ran: the unified diff applied. Omitted: not an edit."""
    exit_code: int | None = None
    """For a command that ran (Bash) and exited: its exit status. A non-zero one makes the
    status `error`. Omitted: no command ran, or a signal ended it (`signal`)."""
    signal: str | None = None
    """For a command that a signal ended: its name, e.g. `SIGKILL` (a timeout or a cancel
    ends a command with `SIGTERM`, or `SIGKILL` after a grace period). Status `error` unless
    the call was cancelled. Omitted: it exited, or no command ran."""


OutputStream = Literal["stdout", "stderr", "combined"]


class ToolOutputEvent(Ev, tag="toolOutput"):
    """What a running command wrote (a Bash call, or a hook run for a call), while it runs.

    Coalesced per call: at most one event per stream every 100 ms, of at most 16 KiB of
    output; once 256 KiB of a call's output were sent, only its last 16 KiB per stream follows,
    just before its `toolCallFinished`. Output left out is counted in `elided`. Never sent
    after the call's `toolCallFinished`; control events never wait behind these (see the
    README). What the model reads is the tool's result, not these events."""

    tool_call_id: str
    """The call the command runs for; empty for a `Stop` hook, which runs for no call."""
    stream: OutputStream
    """`combined`: stdout and stderr as one stream (Bash, as the model sees it); a hook's
    `stdout` and `stderr` are separate streams."""
    text: str
    """The output, decoded as UTF-8 (a character split between events is kept whole; bytes
    that are not UTF-8 become U+FFFD). It may hold any character, control characters and
    terminal escapes included: a client shows it as text, never as markup or to a terminal
    as it is."""
    elided: int | None = None
    """Bytes of this stream left out just before `text` (more than could be shown). Omitted:
    nothing was left out."""
    hook: str | None = None
    """`PreToolUse`, `PostToolUse` or `Stop`: the output is of a hook's command. Omitted: of the
    tool's own command."""


class PermissionAskedEvent(Ev, tag="permissionAsked"):
    tool_call_id: str
    title: str
    preview: Preview | None = None


class HunkOutcome(Wire):
    index: int
    decision: HunkDecision
    message: str | None = None


class PermissionAnsweredEvent(Ev, tag="permissionAnswered"):
    """Follows every `permissionAsked` (before the call's `toolCallFinished`), and every call
    the daemon refuses without asking."""

    tool_call_id: str
    decision: PermissionOutcome
    """`cancelled`: the turn was cancelled while the prompt was open."""
    rule: str | None = None
    """With `allowAlways`: the rule saved."""
    reason: str | None = None
    """Set when the daemon decided without asking (a rule, the mode, a hook, no client
    support, a timeout, a cancelled turn), or when an `allowAlways` rule was not kept as
    asked."""
    scope: RuleScope | None = None
    """With `allowAlways`: where the rule was kept."""
    hunks: list[HunkOutcome] | None = None
    """For an edit answered per hunk: every hunk's outcome, in order. Omitted: all or nothing."""
    edited: bool | None = None
    """True when the user's own text (`finalText`) was written instead of the proposal.
    Omitted: it was not."""


class TodoItem(Wire):
    content: str
    """The task: `Run the tests`."""
    status: Literal["pending", "inProgress", "completed"]
    active_form: str | None = None
    """The task while it runs: `Running the tests`. Omitted: use `content`."""


class TodoEvent(Ev, tag="todo"):
    """The agent's plan (TodoWrite): the whole list, replacing the previous one."""

    todos: list[TodoItem]


class RetryEvent(Ev, tag="retry"):
    attempt: int
    """The number of the request about to be made: 2 for the first retry."""
    max_attempts: int
    """The most requests one model call makes, the first included (5)."""
    delay_ms: int
    error: ErrorInfo


class UsageEvent(Ev, tag="usage"):
    usage: Usage
    """Totals for the turn so far."""
    context_tokens: int = 0
    """Estimated size of the conversation the next model call sends (for a context meter)."""
    context_window: int = 0
    token_budget: int | None = None
    """The turn's token budget, if one was asked for; progress is `usage.outputTokens`."""


class AgentEventEvent(Ev, tag="agent"):
    """An event of a sub-agent (the Task tool), shown under the Task call that started it.
    Sub-agents' tool calls, permission and error events are forwarded, and the live output of
    the hooks their calls run (sub-agents run no commands of their own); their text is not
    (the Task call's result is the sub-agent's answer)."""

    tool_call_id: str
    """The Task call."""
    agent: str
    """The task's short description."""
    event: "Event"


class TurnEndedEvent(Ev, tag="turnEnded"):
    """Always the last event of a turn; the same facts as the `turn/start` result."""

    reason: TerminalReason
    usage: Usage
    cancel_phase: CancelPhase | None = None
    error: ErrorInfo | None = None


class ModelCallEvent(Ev, tag="modelCall"):
    """A model call began. Text, thinking and tool calls that follow belong to it."""

    index: int
    """0 for the first call of the turn."""
    model: str


class TombstoneEvent(Ev, tag="tombstone"):
    """Remove what model call `index` showed: it is being redone (its response broke off, the
    output limit was raised, the model fell back). Its tool calls have ended `cancelled`
    before it; a `modelCall` with the next index follows."""

    index: int
    reason: str


class ModelFallbackEvent(Ev, tag="modelFallback"):
    from_model: str
    to_model: str
    error: ErrorInfo


class CompactionEvent(Ev, tag="compaction"):
    layer: str
    """`reactive` (after a prompt-too-long error), `auto`, or `manual`."""
    tokens_before: int
    tokens_after: int
    summary: str = ""


class ToolSummaryEvent(Ev, tag="toolSummary"):
    tool_call_ids: list[str]
    summary: str
    """One line, e.g. `Read the config and found the timeout setting`."""


class LoopDetectedEvent(Ev, tag="loopDetected"):
    """The repeat guard refused a call: it repeated the same call, or the same short cycle of
    calls, with the same results (`warn_at`/`stop_at` of the `[loop]` settings). The call's
    `toolCallFinished` came before (status `rejected`); next, the user is asked whether the
    turn may go on (a `permission/request` with `loop: true`), or, in `bypassPermissions`
    mode or when nobody can be asked, the turn ends with `loopDetected`."""

    tool_call_id: str
    """The call that did not run."""
    tool: str
    count: int
    """How many times the call, or cycle, was made in a row, the refused one included."""
    cycle: list[str]
    """The tools of the repeated cycle in call order: one for the same call repeated, up to
    four for a cycle (`Read`, `Bash`)."""
    description: str
    """One human line: `the agent made the same Bash call 4 times in a row with the same
    result`."""


class ErrorEvent(Ev, tag="error"):
    error: ErrorInfo


class ModeChangedEvent(Ev, tag="modeChanged"):
    """The session's permission mode changed during the turn: the user approved a plan and
    picked the mode the session goes on in (sent after the `permissionAnswered`). The rest of
    the turn and the next turns run in it; `session/configure` changes it otherwise."""

    mode: PermissionMode


Event = Union[
    TurnStartedEvent, TextDeltaEvent, ThinkingDeltaEvent, ToolCallStartedEvent,
    ToolCallInputEvent, ToolCallFinishedEvent, PermissionAskedEvent, PermissionAnsweredEvent,
    RetryEvent, UsageEvent, ErrorEvent, TurnEndedEvent, ModelCallEvent, TombstoneEvent,
    ModelFallbackEvent, CompactionEvent, ToolSummaryEvent, TodoEvent, AgentEventEvent,
    ToolOutputEvent, ModeChangedEvent, LoopDetectedEvent,
]

EVENT_TYPES: tuple[type[Ev], ...] = Event.__args__


class TurnEventParams(Wire):
    session_id: str
    turn_id: str
    seq: int
    """Starts at 0 for each turn and increases by one per event: a gap means a lost event."""
    event: Event


def event_kind(cls: type[Ev]) -> str:
    return msgspec.inspect.type_info(cls).tag
