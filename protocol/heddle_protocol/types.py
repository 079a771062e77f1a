"""Request, result and shared value types of the wire (snake_case here, camelCase on the wire).

Every optional field documents what omitting it means. Paths on the wire are absolute.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

PROTOCOL_VERSION = 0
"""Bumped on every incompatible change; clients compare it with what `initialize` returns."""


class Wire(msgspec.Struct, rename="camel", kw_only=True, omit_defaults=True):
    """Base of every wire type: camelCase names, unknown fields ignored, defaults omitted."""


PermissionMode = Literal["default", "acceptEdits", "plan", "bypassPermissions"]
"""`default`: read-only tools run, everything else asks. `acceptEdits`: file edits run without
asking, shell still asks. `plan`: read-only; edits and shell are refused with a message to the
model. `bypassPermissions`: everything runs without asking."""

TerminalReason = Literal[
    "completed", "cancelled", "maxTurns", "promptTooLong", "modelError", "blockingLimit",
    "stopHookPrevented", "hookStopped", "tokenBudget", "loopDetected",
]
"""Why a turn ended; `protocol/README.md` documents each."""

CancelPhase = Literal["streaming", "tools"]
Effort = Literal["low", "medium", "high", "xhigh", "max"]
"""The Messages API's `output_config.effort` levels, lowest first."""


# --- initialize -------------------------------------------------------------------------------

class ClientHeddleCapabilities(Wire):
    """Sent by the client as `capabilities.experimental.heddle` in `initialize`."""

    permission_requests: bool = False
    """The client answers `permission/request`. Omitted: false, so every tool that would ask
    gets the permission mode's safe default (refused, with the reason in the tool result)."""
    review_hunks: bool = False
    """The client can answer an edit's `permission/request` per hunk (`hunks`, `finalText`).
    Informative: the daemon sends `preview.before/after/hunks` to every client."""
    diagnostic_requests: bool = False
    """The client answers `diagnostics/list` with an open document's diagnostics (its language
    servers' errors and warnings). Omitted: false, so the client is never asked, and the
    result of an edit tells the model of no diagnostics."""


class ServerHeddleCapabilities(Wire):
    """Returned as `capabilities.experimental.heddle` in the `initialize` result."""

    protocol_version: int
    server_version: str
    methods: list[str]
    """Every Heddle method name this daemon implements, both directions."""
    event_kinds: list[str]
    """Every `kind` a `turn/event` may carry."""
    tools: list[str]
    """Names of the tools the agent can use."""


# --- sessions ---------------------------------------------------------------------------------

class SessionNewParams(Wire):
    workspace: str
    """Absolute path of the workspace folder; tools resolve relative paths against it."""
    model: str | None = None
    """Model id. Omitted: `model` from the settings files, else the daemon's default
    (`HEDDLE_MODEL`, else the built-in)."""
    permission_mode: PermissionMode | None = None
    """Omitted: `permissions.mode` from the settings files, else `default`."""
    system_prompt: str | None = None
    """Extra instructions appended to Heddle's system prompt. Omitted: none."""
    fallback_model: str | None = None
    """Model to switch to when this one stays overloaded (no other error switches models).
    Omitted: `HEDDLE_FALLBACK_MODEL`, else the settings' `fallback_model`, else no fallback."""
    thinking_budget: Annotated[int, msgspec.Meta(ge=0)] | None = None
    """Thinking: 0 turns it off; a number (at least 1024) is a budget in tokens, sent as
    `budget_tokens` to the models that take one and as the room left for adaptive thinking
    to those that take only that. Omitted: the settings' `thinking`, else auto (on for the
    models that think: adaptive where the model takes it, else a budget of 16,000 tokens)."""
    effort: Effort | None = None
    """`output_config.effort` of the session's model calls, for the models that take it (a
    level a model does not take becomes the highest below it that it does). Omitted: the
    settings' `effort`, else the model's default."""
    summary_model: str | None = None
    """Cheap model that labels each tool batch with a one-line `toolSummary` event. Omitted:
    `HEDDLE_SUMMARY_MODEL`, else off."""
    compact_model: str | None = None
    """Model that writes compaction summaries. Omitted: `HEDDLE_COMPACT_MODEL`, else the
    session's model."""


class UntrustedSettings(Wire):
    """Project settings that would widen permissions, ignored until the user trusts them."""

    settings_file: str
    """Absolute path of `<workspace>/.heddle/settings.toml`."""
    sha256: str
    """Of the file's content as read; pass it to `workspace/trust` to trust exactly that."""
    ignored: list[str]
    """What the file would enable, one line each: `allow rule Bash(make:*)`,
    `permission mode bypassPermissions`, ``PreToolUse hook `./check.sh` ``."""


class McpServerInfo(Wire):
    """One MCP server of a session ([docs/mcp.md](../docs/mcp.md))."""

    name: str
    transport: Literal["stdio", "http"]
    source: Literal["user", "project", "client"]
    """Which settings file it came from (`client`: the front door's request)."""
    state: Literal["starting", "ready", "restarting", "failed", "stopped"]
    """When the result was sent. `starting`: not ready within the start-up bound; its tools
    join from the next turn that starts after it is ready."""
    tools: list[str] = []
    """The names the model sees: `mcp__<server>__<tool>`."""
    error: str | None = None
    """Why it failed or last stopped."""
    restarts: int = 0


class McpServerChangedParams(Wire):
    """An MCP server of a live session changed state after the `session/new` or `session/load`
    result that reported it (the state until then is in that result)."""

    session_id: str
    server: McpServerInfo
    """The server as it is now: `restarting` (it stopped; it is started again in
    `restartInMs`), `ready` (running again after a restart, or ready after the start-up bound:
    its tools are offered from the next turn), or `failed` (for good, in this session)."""
    message: str
    """What happened, in one line for the user; show it as an error for `failed`, a warning
    for `restarting`, information for `ready`."""
    stderr: list[str] = []
    """The last lines its stderr had when it stopped, oldest first: at most 10, each at most
    500 characters, with the values of its `env` and of secret-looking variables replaced by
    `[secret]`. Omitted: none (it is `ready`, an HTTP server, or it wrote nothing)."""
    restart_in_ms: int | None = None
    """With `restarting`: milliseconds until the restart (500 before the first, twice as long
    before each later one). Omitted: no restart is coming."""


class InstructionFileInfo(Wire):
    """An instruction file whose text the model gets at the start of the session
    ([docs/instructions.md](../docs/instructions.md)); text only, it grants no permission."""

    path: str
    scope: Literal["user", "project", "import"]
    """`user`: the user's own `AGENTS.md` in Heddle's config folder; `project`: an `AGENTS.md`
    (else `CLAUDE.md`) of a folder from the repository root down to the workspace; `import`: a
    file one of them imports with `@path`."""
    bytes: int
    """The file's size."""
    truncated: bool = False
    """The model gets only its first part, or none of it: the files are capped at 32 KiB
    together, and the ones in deeper folders keep their text first. Omitted: false, it gets
    all of it."""


class SessionNewResult(Wire):
    session_id: str
    workspace: str
    model: str
    permission_mode: PermissionMode
    warnings: list[str] = []
    """Problems in the settings files; the settings concerned were ignored. Omitted: none."""
    untrusted_settings: UntrustedSettings | None = None
    """Set when the project settings are not trusted, so what they would widen is ignored (a
    `window/showMessage` warning says so too). Omitted: nothing was ignored for want of trust."""
    mcp_servers: list[McpServerInfo] = []
    """The session's MCP servers from the settings files (a project's only once trusted), as
    they were after the start-up bound. Omitted: none."""
    instructions: list[InstructionFileInfo] = []
    """The instruction files in force, in the order the model reads them (the user's, then
    from the repository root down to the workspace, each file's imports after it). A folder
    below the workspace adds its own file later, when the agent first works in it; those are
    not listed. Omitted: none."""


class SessionListParams(Wire):
    workspace: str | None = None
    """Only sessions of this workspace folder. Omitted: all."""


class SessionInfo(Wire):
    session_id: str
    title: str
    """The first prompt, shortened. Empty until the first turn."""
    workspace: str
    model: str
    created_at: str
    """ISO 8601, UTC."""
    updated_at: str
    turns: int
    live: bool
    """Loaded in this daemon now."""
    last_reason: TerminalReason | None = None
    """How the last turn ended. Omitted: no turn ended (none ran, or Heddle stopped during it)."""


class SessionListResult(Wire):
    sessions: list[SessionInfo]
    """Newest first."""


class SessionLoadParams(Wire):
    session_id: str


class SessionLoadResult(Wire):
    session_id: str
    workspace: str
    model: str
    permission_mode: PermissionMode
    turns: int
    title: str
    warnings: list[str] = []
    """What was repaired or skipped (a truncated last line, tool calls cut off by a crash), and
    problems in the settings files. Omitted: none."""
    untrusted_settings: UntrustedSettings | None = None
    """As in `session/new`. Omitted: nothing was ignored for want of trust."""
    mcp_servers: list[McpServerInfo] = []
    """As in `session/new`. Omitted: none."""
    instructions: list[InstructionFileInfo] = []
    """As in `session/new`, read again at the load. Omitted: none."""


class SessionConfigureParams(Wire):
    session_id: str
    permission_mode: PermissionMode | None = None
    """The mode from the session's next turn on; the user's choice, so it may widen (also to
    `bypassPermissions`, which has to be named here as in `session/new`). Omitted: unchanged."""
    model: Annotated[str, msgspec.Meta(min_length=1)] | None = None
    """The model from the session's next turn on. Omitted: unchanged."""


class SessionConfigureResult(Wire):
    session_id: str
    model: str
    permission_mode: PermissionMode


class SessionCompactParams(Wire):
    session_id: str


class SessionCloseParams(Wire):
    session_id: str


class SessionCloseResult(Wire):
    session_id: str
    mcp_servers_stopped: int = 0


class SessionCompactResult(Wire):
    tokens_before: int
    tokens_after: int
    summary: str


# --- turns ------------------------------------------------------------------------------------

class LineRange(Wire):
    start_line: int
    """1-based, inclusive."""
    end_line: int
    """1-based, inclusive."""


class ContextItem(Wire):
    """Something the user is looking at, sent along with the prompt."""

    path: str
    """Absolute path of the file."""
    text: str | None = None
    """The selected text (or the unsaved buffer). Omitted: the model is told the path only."""
    range: LineRange | None = None
    """The selected lines. Omitted: the whole file (or no particular place)."""
    language: str | None = None
    """Language id, e.g. `python`. Omitted: unknown."""


class TurnStartParams(Wire):
    session_id: str
    prompt: str
    context: list[ContextItem] = []
    """The active file, selection, ... Omitted: none."""
    max_turns: int | None = None
    """Upper bound on model responses that continue the turn. Omitted: 100."""
    if_busy: Literal["reject", "interrupt", "queue"] = "reject"
    """What to do if the session is running a turn: `reject` (error -32011), `interrupt` (cancel
    it; no interruption note, this prompt carries the context), or `queue` (the running turn
    takes the prompt in at its next step; if that turn does not complete, the prompt runs as a
    turn of its own). Omitted: `reject`."""
    token_budget: int | None = None
    """Keep working until this many output tokens are spent (like `+500k` in the prompt).
    Omitted: a `+Nk`/`+Nm` in the prompt, else none."""
    task_budget: int | None = None
    """Hard cap on the turn's input+output tokens (reason `tokenBudget`). Omitted: none."""


class Usage(Wire):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    model_calls: int = 0
    """Model requests made (retries included)."""


class ErrorInfo(Wire):
    code: str
    """Stable classification: `overloaded`, `rateLimited`, `serverError`, `connection`, `timeout`,
    `streamInterrupted`, `promptTooLong`, `invalidRequest`, `authentication`, `permission`,
    `notFound`, `unknownModel` (the endpoint does not serve the model), `internal`;
    `interrupted` in the replay of a turn Heddle stopped during."""
    message: str
    status: int | None = None
    """HTTP status of the failed model request. Omitted: not an HTTP error."""
    retryable: bool = False
    """A failure of a kind Heddle retries (at most 5 requests per model call): in a turn's
    error, the retries ran out, and the prompt may well work later; false: it would fail the
    same way again."""


class TurnStartResult(Wire):
    turn_id: str
    reason: TerminalReason
    usage: Usage
    # text and transitions have no default so that omit_defaults cannot leave them out: the
    # spec promises both in every result, empty or not
    text: str
    """The final assistant text of the turn; `""` when it ended without any."""
    transitions: list[str]
    """Why the loop went round, once per extra iteration, in order (`[]`: it did not): `next_turn`,
    `max_output_tokens_escalate`, `max_output_tokens_recovery`, `reactive_compact_retry`,
    `collapse_drain_retry`, `stop_hook_blocking`, `token_budget_continuation`."""
    cancel_phase: CancelPhase | None = None
    """Only with reason `cancelled`: whether the model was streaming or tools were running."""
    error: ErrorInfo | None = None
    """Only with an error reason (`modelError`, `promptTooLong`, ...). Omitted: no error."""


class TurnCancelParams(Wire):
    session_id: str
    turn_id: str | None = None
    """Cancel only if this turn is the running one. Omitted: whatever turn is running."""


# --- permission -------------------------------------------------------------------------------

class DiffHunk(Wire):
    """One hunk of a `DiffPreview.diff` (difflib, 3 lines of context, as `git add -p` shows)."""

    index: int
    """From 0, in the order of `diff`."""
    old_start: int
    """1-based first line in `before`, as in the `@@` line (for an empty range: the line
    after which the new lines go, 0 at the start of the file)."""
    old_lines: int
    new_start: int
    """1-based first line in `after`, as in the `@@` line."""
    new_lines: int
    diff: str
    """This hunk's text, its `@@` header line first."""


class DiffPreview(Wire, tag="diff", tag_field="kind"):
    path: str
    diff: str
    """Unified diff of the change."""
    before: str | None = None
    """The current text: the editor's buffer if the file is open there, else the disk's; ""
    for a new file. Omitted (with `after` and `hunks`) when either text is over 1 MiB or not
    UTF-8: then the answer is all or nothing."""
    after: str | None = None
    """The proposed full text."""
    hunks: list[DiffHunk] | None = None
    """The hunks of `diff`, which an answer may accept or reject one by one. (`before`,
    `after` and `hunks` are sent in `permission/request` only, not in `permissionAsked`.)"""


class CommandPreview(Wire, tag="command", tag_field="kind"):
    command: str
    cwd: str


class PlanPreview(Wire, tag="plan", tag_field="kind"):
    """A plan the agent presents in plan mode (its `PresentPlan` tool), for the user to approve
    and pick the mode the session goes on in, or to reject with feedback."""

    plan: str
    """The plan in Markdown, as the model wrote it."""


Preview = DiffPreview | CommandPreview | PlanPreview

PermissionDecision = Literal["allowOnce", "allowAlways", "reject"]
"""What the user answers to a `permission/request`."""

PermissionOutcome = Literal["allowOnce", "allowAlways", "reject", "cancelled"]
"""How a permission question ended (`permissionAnswered`): the user's decision, or
`cancelled` when the turn was cancelled while the prompt was open."""

RuleKind = Literal["allow", "deny", "ask"]
"""`allow`: runs without asking; `deny`: refused, whatever else applies; `ask`: always asks."""

RuleScope = Literal["session", "project", "user"]
"""Where a rule lives: this session only, `<workspace>/.heddle/settings.toml`, or the user's
`$XDG_CONFIG_HOME/heddle/settings.toml`."""


class PermissionOption(Wire):
    decision: PermissionDecision
    label: str
    rule: str | None = None
    """With `allowAlways`: the rule that would be saved, e.g. `Bash(git status:*)`."""
    mode: PermissionMode | None = None
    """With a plan (`preview.kind` `plan`): the permission mode the session goes on in when
    the user picks this option (`default`, `acceptEdits`). Omitted: not a plan's option."""


class PermissionRequestParams(Wire):
    session_id: str
    turn_id: str
    tool_call_id: str
    tool: str
    input: dict[str, Any]
    title: str
    """One human line: `Edit src/app.py`, `Run: pytest -x`."""
    options: list[PermissionOption]
    preview: Preview | None = None
    """Omitted: nothing to preview beyond the title."""
    loop: bool | None = None
    """True: not a tool call's permission, but whether a turn the repeat guard caught may go
    on (a `loopDetected` event for `toolCallId` came just before). `allowOnce` lets it go on,
    counting afresh; `reject` ends the turn with `loopDetected`. Omitted: a tool call's
    permission."""


HunkDecision = Literal["accept", "reject"]


class HunkAnswer(Wire):
    index: int
    """A `DiffHunk.index` of the request's preview."""
    decision: HunkDecision
    message: str | None = None
    """With `reject`: told to the model with the hunk. Omitted: no message."""


class PermissionRequestResult(Wire):
    decision: PermissionDecision
    rule: str | None = None
    """With `allowAlways`: the rule to save, possibly edited. Omitted: the offered rule."""
    message: str | None = None
    """With `reject`: told to the model as the tool result. Omitted: a generic refusal."""
    scope: RuleScope | None = None
    """With `allowAlways`: where to keep the rule. Omitted: `session`."""
    hunks: list[HunkAnswer] | None = None
    """With `allowOnce`/`allowAlways` on a preview with `hunks`: the user's decision per hunk;
    hunks not listed are accepted. Every hunk rejected counts as `reject` (their messages
    joined are the message). An unknown or repeated index makes the answer invalid (a
    rejection). Omitted: every hunk accepted."""
    final_text: str | None = None
    """With `allowOnce`/`allowAlways` on a preview with `after`: the text the user wants
    written instead of the proposal (they edited it); takes precedence over `hunks`.
    Omitted: the proposal, with `hunks` applied."""
    mode: PermissionMode | None = None
    """With `allowOnce` on a plan: the mode the session goes on in (the chosen option's
    `mode`); `plan` is taken as `default`. Omitted: `default`."""


# --- workspace/applyEdit (standard LSP, the subset Heddle sends) -----------------------------

class Position(Wire):
    line: int
    """0-based."""
    character: int
    """0-based, in the negotiated `positionEncoding` (UTF-16 code units by default)."""


class TextRange(Wire):
    start: Position
    end: Position


class TextEdit(Wire):
    range: TextRange
    new_text: str


class VersionedDocument(Wire):
    uri: str
    version: int
    """The buffer's version as the client last reported it (`didOpen`/`didChange`)."""


class TextDocumentEdit(Wire):
    text_document: VersionedDocument
    edits: list[TextEdit]
    """Line-granular: one per changed region, ranges in the document before the edit, at
    character 0 except at the end of a last line without a newline."""


class WorkspaceEdit(Wire):
    document_changes: list[TextDocumentEdit]


class ApplyWorkspaceEditParams(Wire):
    label: str
    """`Heddle: Edit app.py`."""
    edit: WorkspaceEdit


class ApplyWorkspaceEditResult(Wire):
    applied: bool
    failure_reason: str | None = None
    """With `applied: false`: why, quoted to the model. Omitted: no reason given."""
    failed_change: int | None = None


# --- diagnostics/list (daemon -> client) ------------------------------------------------------

class DiagnosticsListParams(Wire):
    uri: str
    """The open document, as the client named it in `textDocument/didOpen`."""


DiagnosticSeverity = Literal[1, 2, 3, 4]
"""LSP's: 1 error, 2 warning, 3 information, 4 hint."""


class Diagnostic(Wire):
    """LSP's `Diagnostic`, the part the daemon reads."""

    range: TextRange
    """Where, in the document as the client holds it now. The daemon uses the start line."""
    severity: DiagnosticSeverity
    message: str
    source: str | None = None
    """What reported it (`Pylance`, `json`). Omitted: not said."""
    code: str | int | None = None
    """The source's code for it (`reportUndefinedVariable`, `F401`). Omitted: none."""


class DiagnosticsListResult(Wire):
    diagnostics: list[Diagnostic]
    """Every diagnostic the client holds for the document now, from every source."""
    generation: int | None = None
    """A number the client raises each time any source reports the document's diagnostics
    again, even the same ones, so the daemon can tell that they are fresh after an edit.
    Omitted: the daemon can tell only by their differing from before the edit, so after an
    edit that changes none it waits the whole settle time."""


# --- workspace trust --------------------------------------------------------------------------

class WorkspaceTrustParams(Wire):
    workspace: str
    """Absolute path of the workspace folder whose `.heddle/settings.toml` to trust."""
    sha256: str | None = None
    """Trust only if the file still has this content (from `untrustedSettings.sha256`); else
    error `-32015`. Omitted: trust the file as it is now."""
    dry_run: bool = False
    """Only say what trusting the file would enable, and whether it is trusted: record nothing
    (a client shows this before it asks the user). Omitted: false."""


class WorkspaceTrustResult(Wire):
    settings_file: str
    """Absolute path of the project settings file."""
    sha256: str | None = None
    """Of the content now trusted. Omitted: there is no project settings file (nothing to
    trust)."""
    enables: list[str] = []
    """What the trust applies that was ignored before, one line each. Omitted: nothing (the
    file only narrows permissions, or does not exist)."""
    trusted: bool = True
    """The file's content is trusted now (or needs no trust); false only for a `dryRun` on
    content not yet trusted. Omitted: true."""


# --- rules ------------------------------------------------------------------------------------

class PermissionRule(Wire):
    rule: str
    """`Tool` or `Tool(pattern)`: `Bash(git status:*)`, `Edit(src/**)`, `Read(~/.ssh/**)`."""
    kind: RuleKind
    scope: RuleScope


class RulesListParams(Wire):
    session_id: str


class RulesListResult(Wire):
    rules: list[PermissionRule]
    """Every rule the session applies, user settings first, then project, then session."""
    user_settings: str
    """Absolute path of the user settings file (it may not exist yet)."""
    project_settings: str
    """Absolute path of the project settings file (it may not exist yet)."""


class RulesAddParams(Wire):
    session_id: str
    rule: str
    kind: RuleKind = "allow"
    """Omitted: `allow`."""
    scope: RuleScope = "session"
    """Omitted: `session`. `project` and `user` rules are written to their settings file."""


class RulesAddResult(Wire):
    rule: PermissionRule
    """The rule as kept (normalised: `Bash(*)` becomes `Bash`)."""


class RulesRevokeParams(Wire):
    session_id: str
    rule: str
    kind: RuleKind | None = None
    """Omitted: every kind."""
    scope: RuleScope | None = None
    """Omitted: every scope. `project` and `user` rules are removed from their settings file."""


class RulesRevokeResult(Wire):
    revoked: list[PermissionRule]
    """What was removed; empty when no rule matched."""
