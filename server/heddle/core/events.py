"""Core events: what the loop reports while it runs. `rpc/` turns them into wire events.

The loop yields these from `query()`; tools report theirs through `ToolContext.emit`.
"""

from __future__ import annotations

import enum
from typing import Any, Literal, Union

import msgspec

from heddle.core.hunks import Hunk, HunkDecision
from heddle.core.messages import Message, RedactedThinkingBlock, ThinkingBlock, ToolResultBlock


class ErrorInfo(msgspec.Struct, frozen=True):
    code: str
    message: str
    status: int | None = None
    retryable: bool = False


class Usage(msgspec.Struct, frozen=True):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    model_calls: int = 0

    @property
    def prompt_tokens(self) -> int:
        """All input of the request(s): `input_tokens` is only the part after the last cache
        breakpoint, as the Messages API reports it."""
        return self.input_tokens + self.cache_read_input_tokens + self.cache_creation_input_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(*(a + b for a, b in zip(msgspec.structs.astuple(self),
                                             msgspec.structs.astuple(other))))


class TextDelta(msgspec.Struct, frozen=True):
    text: str


class ThinkingDelta(msgspec.Struct, frozen=True):
    text: str


class ToolCallStarted(msgspec.Struct, frozen=True):
    tool_call_id: str
    tool: str


class ToolCallInput(msgspec.Struct, frozen=True):
    tool_call_id: str
    tool: str
    input: dict[str, Any]
    title: str


ToolStatus = Literal["ok", "error", "rejected", "cancelled"]


class ToolCallFinished(msgspec.Struct, frozen=True):
    tool_call_id: str
    tool: str
    status: ToolStatus
    summary: str
    diff: str | None = None
    result: ToolResultBlock | None = None
    """The tool_result the model will get (for transcripts; not sent to clients). None: the
    call did not run."""
    exit_code: int | None = None
    """The command's exit status (Bash); None: no command, or a signal ended it."""
    signal: str | None = None
    """The signal that ended the command (`SIGKILL`); None: it exited, or no command."""


OutputStream = Literal["stdout", "stderr", "combined"]


class ToolOutputChunk(msgspec.Struct, frozen=True):
    """Bytes a running command wrote (a Bash call, or a hook run for the call): what the
    editor shows live. The model's result is made separately, from the whole output."""

    tool_call_id: str
    """The call; "" for a Stop hook, which runs for no call."""
    stream: OutputStream
    data: bytes
    hook: str | None = None
    """The hook event (`PreToolUse`, `PostToolUse`, `Stop`) whose command wrote it; None: the
    tool's own command."""


class DiffPreview(msgspec.Struct, frozen=True):
    path: str
    diff: str
    before: str | None = None
    """The current text and the proposal, for review hunk by hunk; None: too big, diff only."""
    after: str | None = None
    hunks: tuple[Hunk, ...] = ()


class CommandPreview(msgspec.Struct, frozen=True):
    command: str
    cwd: str


class PlanPreview(msgspec.Struct, frozen=True):
    """A plan the model presents for approval (PresentPlan), in Markdown."""

    plan: str


Preview = Union[DiffPreview, CommandPreview, PlanPreview]


class PermissionAsked(msgspec.Struct, frozen=True):
    tool_call_id: str
    title: str
    preview: Preview | None = None


class PermissionAnswered(msgspec.Struct, frozen=True):
    tool_call_id: str
    decision: Literal["allowOnce", "allowAlways", "reject", "cancelled"]
    """`cancelled`: the turn ended while the prompt was open."""
    rule: str | None = None
    reason: str | None = None
    scope: Literal["session", "project", "user"] | None = None
    """With allowAlways: where the rule was kept."""
    hunks: tuple[HunkDecision, ...] = ()
    """An edit answered hunk by hunk: every hunk's outcome. Empty: all or nothing."""
    edited: bool = False
    """The user's own text was written instead of the proposal."""


class ModeChanged(msgspec.Struct, frozen=True):
    """The session's permission mode changed during a turn (the user approved a plan)."""

    mode: str


class TodoItem(msgspec.Struct, frozen=True):
    content: str
    status: Literal["pending", "in_progress", "completed"]
    active_form: str | None = None


class TodoUpdate(msgspec.Struct, frozen=True):
    """The agent's plan, as TodoWrite last set it."""

    todos: tuple[TodoItem, ...]


class Retry(msgspec.Struct, frozen=True):
    attempt: int
    max_attempts: int
    delay_ms: int
    error: ErrorInfo


class UsageReport(msgspec.Struct, frozen=True):
    usage: Usage
    context_tokens: int = 0
    """Estimated size of the conversation the next model call will send."""
    context_window: int = 0
    token_budget: int | None = None


class ModelCallStarted(msgspec.Struct, frozen=True):
    """A model call of this turn began; `index` counts from 0 and names its output."""

    index: int
    model: str


class Tombstone(msgspec.Struct, frozen=True):
    """Discard what model call `index` produced (it was retried or replaced)."""

    index: int
    reason: str


class ModelFallback(msgspec.Struct, frozen=True):
    from_model: str
    to_model: str
    error: ErrorInfo


class Compaction(msgspec.Struct, frozen=True):
    layer: str
    tokens_before: int
    tokens_after: int
    summary: str = ""
    messages: tuple[Message, ...] = ()
    """The conversation that replaces the history (for transcripts; not sent to clients)."""


class ToolSummary(msgspec.Struct, frozen=True):
    tool_call_ids: tuple[str, ...]
    summary: str


class LoopDetected(msgspec.Struct, frozen=True):
    """The repeat guard refused a call that repeated the same call, or cycle of calls, with the
    same results (`heddle.loop.repeats`); the user is asked next whether the turn may go on."""

    tool_call_id: str
    """The call that did not run."""
    tool: str
    count: int
    """How many times the call (or cycle) was made, the refused one included."""
    cycle: tuple[str, ...]
    """The tools of the repeated cycle, in call order; one for the same call repeated."""
    description: str


class ErrorReport(msgspec.Struct, frozen=True):
    error: ErrorInfo


class MessageFinal(msgspec.Struct, frozen=True):
    """Content became part of the conversation (for transcripts); not sent to clients. A user
    message is appended with `append_user` semantics: it merges into a trailing user message."""

    message: Message


class ThinkingDone(msgspec.Struct, frozen=True):
    """A thinking block of the response streaming now is complete, with its signature (for
    transcripts: a load after a crash keeps it in a reply cut off later); not sent to clients."""

    block: ThinkingBlock | RedactedThinkingBlock
    after_tools: int
    """How many tool calls of this response came before it."""


class AgentEvent(msgspec.Struct, frozen=True):
    """An event of a sub-agent, shown under the Task call that started it."""

    tool_call_id: str
    agent: str
    event: "CoreEvent"


class TurnEnded(msgspec.Struct, frozen=True):
    """Sent last for each turn, with the facts of its Terminal (the driver sends it)."""

    reason: "TerminalReason"
    usage: Usage
    error: ErrorInfo | None = None


class TerminalReason(enum.Enum):
    """Why `query()` stopped: the ten reasons of the loop design, and the repeat guard's."""

    COMPLETED = "completed"
    ABORTED_STREAMING = "aborted_streaming"
    ABORTED_TOOLS = "aborted_tools"
    MAX_TURNS = "max_turns"
    PROMPT_TOO_LONG = "prompt_too_long"
    MODEL_ERROR = "model_error"
    BLOCKING_LIMIT = "blocking_limit"
    STOP_HOOK_PREVENTED = "stop_hook_prevented"
    HOOK_STOPPED = "hook_stopped"
    TOKEN_BUDGET = "token_budget"
    LOOP_DETECTED = "loop_detected"


class Terminal(msgspec.Struct, frozen=True):
    """The last item `query()` yields: why it stopped and the conversation as it stands."""

    reason: TerminalReason
    messages: tuple[Message, ...]
    usage: Usage
    text: str = ""
    error: ErrorInfo | None = None
    transitions: tuple[str, ...] = ()
    """The continue reasons of the iterations, in order."""


CoreEvent = Union[
    TextDelta, ThinkingDelta, ToolCallStarted, ToolCallInput, ToolCallFinished, PermissionAsked,
    PermissionAnswered, Retry, UsageReport, ErrorReport, MessageFinal, Terminal,
    ModelCallStarted, Tombstone, ModelFallback, Compaction, ToolSummary, TurnEnded,
    TodoUpdate, AgentEvent, ToolOutputChunk, ThinkingDone, ModeChanged, LoopDetected,
]
