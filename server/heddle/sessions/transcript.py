"""Transcripts: one append-only JSONL file per session, written as things become final.

Line 1 is a header (format version, session id, workspace, model, creation time, and the
options the session was created with). Then one line per record, flushed as it is written, so a
crash loses nothing that was already shown:

    {"type": "turn", "turnId", "prompt", "at"}             a turn started
    {"type": "message", "turnId", "message", "call"}       conversation content became final
                                                           (`call`: the model call it followed)
    {"type": "toolResult", "turnId", "result", "status", "summary", "diff", "exitCode"?,
     "signal"?}                                            a tool call finished (its batch's
                                                           results become a message later;
                                                           how its command ended, if it ran one)
    {"type": "thinking", "turnId", "block", "call", "afterTools"}
                                                           a thinking block of model call
                                                           `call` completed, after that many
                                                           of its tool calls (its message may
                                                           never become final)
    {"type": "event", "turnId", "event"}                   an event as the editor was sent it
    {"type": "compacted", "turnId", "messages", "summary"?}
                                                           the history was replaced by a summary
                                                           (`summary`: by `session/compact`, whose
                                                           summary is in no event)
    {"type": "rules", "rules": [{"kind", "rule"}]}         the session's own permission rules,
                                                           whole, after each change
    {"type": "configured", "permissionMode"?, "model"?, "at"}
                                                           `session/configure` changed the
                                                           mode and/or model from here on
    {"type": "end", "turnId", "reason", "usage", "at"}     a turn ended; `reason` null with
                                                           `"interrupted": true`: Heddle stopped
                                                           during it and a load closed it

User messages are appended with the conversation's merge rule (a user message after a user
message joins it), so replaying the lines rebuilds exactly the conversation the model saw.

A turn without an `end` was cut off by a crash. Loading closes it (`Loaded.repairs`: the reply
as far as it was shown, with its signed thinking blocks, a result for every tool call, a
`toolCallFinished` for every started call, a `turnEnded`, an `end`) and the loader appends
those records, so every later load reads the same history. Transcripts written before `call`,
`toolResult` and `rules` existed still load: a turn left open in the middle of one is closed
the same way where the next turn starts.
"""

from __future__ import annotations

import fcntl
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import msgspec

from heddle_protocol import events as wev
from heddle_protocol import types as wire
from heddle.core.events import Usage
from heddle.core.messages import (Block, Message, RedactedThinkingBlock, TextBlock, ThinkingBlock,
                                  ToolResultBlock, ToolUseBlock, append_user, missing_tool_results)
from heddle.private import make_dirs, open_append
from heddle.regular import open_regular
from heddle.shown import one_line
from heddle.xdg import state_dir

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
MAX_HEADER = 1 << 20
"""Longest header line read (bytes): a file whose first line goes on is no transcript. A
header holds the options of `session/new`, the system prompt among them."""
INTERRUPTED_RESULT = ("The session was interrupted (Heddle stopped) while this tool call was "
                      "running; its effect is unknown. Check before relying on it.")
INTERRUPTED_TEXT = "[The session was interrupted here: Heddle stopped before the turn ended.]"
INTERRUPTED_SUMMARY = "interrupted: Heddle stopped"
UNANSWERED_REASON = "Heddle stopped before the question was answered"
STOPPED = wire.ErrorInfo(code="interrupted", message="Heddle stopped during this turn; the "
                         "session was repaired when it was loaded")


class TranscriptError(Exception):
    """A transcript that cannot be loaded (unknown format version, not a transcript)."""


class TranscriptInUse(Exception):
    """Another Heddle process writes the transcript: its session is live there."""


class Header(msgspec.Struct, frozen=True):
    version: int
    session_id: str
    workspace: str
    model: str
    created_at: float
    permission_mode: str = "default"
    type: str = "header"
    system_prompt: str | None = None
    thinking_budget: int | None = None
    fallback_model: str | None = None
    summary_model: str | None = None
    compact_model: str | None = None
    effort: str | None = None
    """The options given at `session/new` (None: the daemon's default when the session runs;
    a `thinking_budget` of 0: thinking off)."""
    mode_from_settings: bool = False
    """`permission_mode` came from the settings files, not from `session/new`: a load takes the
    mode from the settings as they are then (a project file's mode only while it is trusted)."""


_encoder = msgspec.json.Encoder()


class TranscriptWriter:
    """Appends records to one session's file; each write is flushed before it returns.

    It holds an exclusive lock on the file (`flock`) until `close`, or until the process ends:
    a second daemon (another editor window, `heddle ask -c`) cannot load the session meanwhile,
    so two never append to one transcript, and none repairs a turn another still runs."""

    def __init__(self, path: Path, header: Header | None = None):
        self.path = path
        make_dirs(path.parent, own_from=path.parent)
        self._file = open_append(path)  # 0600; a pipe, a device or a symlink there is refused
        try:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._file.close()
            raise TranscriptInUse(path.name) from None
        if header is not None:
            self._write(header)

    def mend(self) -> None:
        """Before appending to a file read (after a crash, say): see `_mend_tail`."""
        _mend_tail(self.path)

    def _write(self, record: Any) -> None:
        if self._file.closed:  # the session was closed; what comes late is not kept
            log.warning("transcript %s is closed: a %s record is not kept", self.path.name,
                        record.get("type") if isinstance(record, dict) else "header")
            return
        try:
            self._file.write(_encoder.encode(record) + b"\n")
        except OSError as exc:  # a full disk must not end the turn; the log says what was lost
            log.error("cannot write transcript %s: %s", self.path, exc)

    def record(self, record: dict[str, Any]) -> None:
        """A record made elsewhere (a load's repairs)."""
        self._write(record)

    def turn(self, turn_id: str, prompt: str) -> None:
        self._write({"type": "turn", "turnId": turn_id, "prompt": prompt, "at": time.time()})

    def message(self, turn_id: str, message: Message, call: int | None = None) -> None:
        record: dict[str, Any] = {"type": "message", "turnId": turn_id, "message": message}
        if call is not None:
            record["call"] = call
        self._write(record)

    def tool_result(self, turn_id: str, result: ToolResultBlock, status: str, summary: str,
                    diff: str | None, exit_code: int | None = None,
                    signal: str | None = None) -> None:
        record: dict[str, Any] = {"type": "toolResult", "turnId": turn_id, "result": result,
                                  "status": status, "summary": summary, "diff": diff}
        if exit_code is not None:
            record["exitCode"] = exit_code
        if signal is not None:
            record["signal"] = signal
        self._write(record)

    def thinking(self, turn_id: str, block: ThinkingBlock | RedactedThinkingBlock,
                 call: int | None, after_tools: int) -> None:
        self._write({"type": "thinking", "turnId": turn_id, "block": block, "call": call,
                     "afterTools": after_tools})

    def event(self, turn_id: str, event: Any) -> None:
        self._write({"type": "event", "turnId": turn_id, "event": event})

    def compacted(self, turn_id: str, messages: tuple[Message, ...],
                  summary: str | None = None) -> None:
        record: dict[str, Any] = {"type": "compacted", "turnId": turn_id, "messages": messages}
        if summary is not None:
            record["summary"] = summary
        self._write(record)

    def rules(self, rules: Iterable[Any]) -> None:
        """The session's own rules (objects with `kind` and `pattern`), all of them."""
        self._write({"type": "rules", "rules": [{"kind": r.kind, "rule": r.pattern}
                                                for r in rules]})

    def configured(self, mode: str | None, model: str | None) -> None:
        record: dict[str, Any] = {"type": "configured", "at": time.time()}
        if mode is not None:
            record["permissionMode"] = mode
        if model is not None:
            record["model"] = model
        self._write(record)

    def end(self, turn_id: str, reason: str, usage: Usage) -> None:
        self._write({"type": "end", "turnId": turn_id, "reason": reason, "usage": usage,
                     "at": time.time()})

    def close(self) -> None:
        """Stop writing, and let another process load the session."""
        self._file.close()


def held_elsewhere(path: Path) -> bool:
    """Whether another process holds the transcript's lock (its session is live there); never
    for a transcript that does not exist (an unknown session has nothing to wait for)."""
    try:
        with open_regular(path, follow_symlinks=False) as f:  # (a pipe would block `open`)
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            return False  # (closing the file lets it go again)
    except OSError:
        return False  # missing, unreadable or no file: the load says so


def _mend_tail(path: Path) -> None:
    """Before appending to a file a crash may have cut mid-line: end a complete last record
    with its newline, drop an incomplete one (it was reported when the file was read), so the
    next record starts a line of its own."""
    try:
        with open(path, "rb+") as f:
            data = f.read()
            if not data or data.endswith(b"\n"):
                return
            start = data.rfind(b"\n") + 1
            try:
                msgspec.json.decode(data[start:])
            except msgspec.DecodeError:
                f.truncate(start)
            else:
                f.write(b"\n")
    except OSError as exc:
        log.error("cannot mend transcript %s: %s", path, exc)


@dataclass
class Loaded:
    header: Header
    messages: tuple[Message, ...] = ()
    events: list[tuple[str, Any]] = field(default_factory=list)
    """(turn id, event) in the order they were sent."""
    turns: int = 0
    title: str = ""
    last_reason: str | None = None
    """How the last turn ended; None if none ran, or Heddle stopped during it."""
    updated_at: float = 0.0
    warnings: list[str] = field(default_factory=list)
    open_turn: str | None = None
    """The turn that never ended (the daemon stopped during it, or it is running now)."""
    session_rules: list[tuple[str, str]] = field(default_factory=list)
    """(kind, rule) of the rules added for this session only."""
    repairs: list[dict[str, Any]] = field(default_factory=list)
    """Records that close the open turn; already applied here, to be appended to the file."""
    model: str | None = None
    permission_mode: str | None = None
    """The latest `session/configure` changes; None: the header's."""
    compactions: list[tuple[int, str]] = field(default_factory=list)
    """(how many `events` came before it, summary) of each compaction outside a turn
    (`session/compact`); those in a turn are `compaction` events."""


class _Finished(msgspec.Struct, frozen=True):
    """A call that finished, as its `toolResult` record says: what its toolCallFinished says."""

    result: ToolResultBlock
    status: str
    summary: str
    diff: str | None = None
    exit_code: int | None = msgspec.field(default=None, name="exitCode")
    signal: str | None = None


@dataclass
class _OpenTurn:
    """What a turn without an `end` has shown so far, to close it."""

    turn_id: str
    at: float
    call: int | None = None
    """The latest model call shown (its `modelCall` event)."""
    shown: list[Any] = field(default_factory=list)
    """The text and complete tool calls that call showed, in order."""
    break_text: bool = False
    final: set[int] = field(default_factory=set)
    """Model calls whose assistant message became final."""
    thinking: dict[int | None, list[tuple[int, Block]]] = field(default_factory=dict)
    """(tool calls before it, block) of each signed thinking block, by model call."""
    results: dict[str, _Finished] = field(default_factory=dict)
    """The calls that finished, by id."""
    calls: dict[tuple[str | None, str], tuple[str | None, str]] = field(default_factory=dict)
    """Started calls without a toolCallFinished: (Task call or None, id) -> (agent, tool)."""
    asked: dict[tuple[str | None, str], str | None] = field(default_factory=dict)
    """permissionAsked without a permissionAnswered: (Task call or None, id) -> agent."""
    usage: wire.Usage = field(default_factory=wire.Usage)
    """The turn's usage as the last `usage` event reported it."""


class _Reader:
    """Folds records into a `Loaded`; the repairs it makes are records folded the same way."""

    def __init__(self, header: Header, messages: bool):
        self.out = Loaded(header, updated_at=header.created_at)
        self.with_messages = messages
        self.convo: tuple[Message, ...] = ()
        self.open: _OpenTurn | None = None

    def feed(self, record: dict) -> None:
        kind = record["type"]
        turn_id = record.get("turnId")
        if (self.open is not None and self.with_messages and kind != "end"
                and turn_id is not None and turn_id != self.open.turn_id):
            # the next turn began (its turnStarted is written first) after a turn an older
            # Heddle left open: it repaired that turn in memory only, and said so then
            for repair in self.closing(report=False):
                self.feed(repair)
        if kind == "turn":
            self.out.turns += 1
            self.open = _OpenTurn(record["turnId"], record.get("at", self.out.updated_at))
            self.out.open_turn = record["turnId"]
            self.out.last_reason = None
            self.out.title = self.out.title or _title(str(record.get("prompt", "")))
            self.out.updated_at = record.get("at", self.out.updated_at)
        elif kind == "end":
            self.out.last_reason = record.get("reason")
            self.out.open_turn = self.open = None
            self.out.updated_at = record.get("at", self.out.updated_at)
        elif kind == "event":
            event = record.get("event")
            self.out.events.append((record.get("turnId", ""), event))
            if self.open is not None and isinstance(event, dict):
                self._shown(event, None, None)
        elif kind == "configured":
            self.out.model = record.get("model") or self.out.model
            self.out.permission_mode = record.get("permissionMode") or self.out.permission_mode
        elif kind == "rules":
            self.out.session_rules = [(r["kind"], r["rule"]) for r in record.get("rules", ())]
        elif kind == "thinking":
            if self.open is not None:
                block = msgspec.convert(record["block"], ThinkingBlock | RedactedThinkingBlock)
                self.open.thinking.setdefault(record.get("call"), []).append(
                    (int(record["afterTools"]), block))
        elif kind == "toolResult":
            if self.open is not None:
                done = msgspec.convert(record, _Finished)
                self.open.results[done.result.tool_use_id] = done
        elif kind == "message":
            if self.open is not None:
                role = record["message"]["role"]
                if "call" not in record:
                    self.open.shown.clear()  # an older transcript: shown text became final
                elif role == "assistant" and isinstance(record["call"], int):
                    self.open.final.add(record["call"])
            if self.with_messages:
                message = msgspec.convert(record["message"], Message)
                self.convo = (append_user(self.convo, message.content) if message.role == "user"
                              else self.convo + (message,))
        elif kind == "compacted":
            if isinstance(record.get("summary"), str):
                self.out.compactions.append((len(self.out.events), record["summary"]))
            if self.with_messages:
                self.convo = tuple(msgspec.convert(record["messages"], list[Message]))

    def _shown(self, event: dict, task: str | None, agent: str | None) -> None:
        """Follow what a turn shows: its current call's text and tools, what is still open."""
        o, kind = self.open, event.get("kind")
        key = (task, str(event.get("toolCallId", "")))
        if kind == "agent" and isinstance(event.get("event"), dict):
            self._shown(event["event"], key[1], str(event.get("agent", "")))
        elif kind == "toolCallStarted":
            o.calls[key] = (agent, str(event.get("tool", "")))
        elif kind == "toolCallFinished":
            o.calls.pop(key, None)
        elif kind == "permissionAsked":
            o.asked[key] = agent
        elif kind == "permissionAnswered":
            o.asked.pop(key, None)
        if task is not None:
            return
        if kind == "textDelta":
            if o.shown and isinstance(o.shown[-1], str) and not o.break_text:
                o.shown[-1] += event.get("text", "")
            else:
                o.shown.append(event.get("text", ""))
            o.break_text = False
        elif kind == "toolCallStarted" or kind == "thinkingDelta":
            o.break_text = True
        elif kind == "toolCallInput":
            given = event.get("input")
            o.shown.append(ToolUseBlock(str(event.get("toolCallId", "")),
                                        str(event.get("tool", "")),
                                        given if isinstance(given, dict) else {}))
        elif kind in ("modelCall", "tombstone"):
            o.shown.clear()
            o.break_text = False
            if kind == "modelCall" and isinstance(event.get("index"), int):
                o.call = event["index"]
        elif kind == "usage":
            try:
                o.usage = msgspec.convert(event.get("usage"), wire.Usage)
            except msgspec.ValidationError:
                pass  # cosmetic: the closing turnEnded reports what was read before

    def closing(self, report: bool = True) -> list[dict[str, Any]]:
        """The records that close the open turn the way a cancel would have closed it; with
        `report`, a warning says what was kept and cut."""
        o, convo, records = self.open, self.convo, []
        warn = self.warn if report else lambda warning: None
        tid = o.turn_id
        phase = "tools" if convo and convo[-1].role == "assistant" else "streaming"
        known = {b.id for m in convo for b in m.content if isinstance(b, ToolUseBlock)}
        blocks = _with_thinking(
            [TextBlock(b) if isinstance(b, str) else b for b in o.shown
             if not (isinstance(b, str) and not b.strip())
             and not (isinstance(b, ToolUseBlock) and b.id in known)],
            o.thinking.get(o.call, []))
        if blocks and o.call not in o.final and (not convo or convo[-1].role == "user"):
            reply = Message("assistant", blocks)
            records.append({"type": "message", "turnId": tid, "message": reply, "call": o.call})
            convo = convo + (reply,)
            warn("a reply was being written when Heddle stopped; it is kept as far as it was "
                 "shown")
        results, cut = [], 0
        for use in missing_tool_results(convo):
            kept = o.results.get(use.id)
            if kept is None:
                cut += 1
            results.append(kept.result if kept else
                           ToolResultBlock(use.id, INTERRUPTED_RESULT, True))
        if cut:
            warn(f"{cut} tool call{'s were' if cut > 1 else ' was'} running when Heddle "
                 f"stopped; {'they were' if cut > 1 else 'it was'} marked as interrupted")
        records.append({"type": "message", "turnId": tid, "call": o.call, "message": Message(
            "user", tuple(results) + (TextBlock(INTERRUPTED_TEXT),))})
        events: list[wev.Ev] = []
        for (task, call_id), agent in o.asked.items():
            events.append(_under(task, agent, wev.PermissionAnsweredEvent(
                tool_call_id=call_id, decision="reject", reason=UNANSWERED_REASON)))
        for (task, call_id), (agent, tool) in o.calls.items():
            kept = o.results.get(call_id) if task is None else None
            if kept is not None:  # it finished: said as it would have been
                finished = wev.ToolCallFinishedEvent(
                    tool_call_id=call_id, tool=tool, status=kept.status, summary=kept.summary,
                    diff=kept.diff, exit_code=kept.exit_code, signal=kept.signal)
            else:  # how it ended is unknown (the reaper killed what was left): no exit status
                finished = wev.ToolCallFinishedEvent(tool_call_id=call_id, tool=tool,
                                                     status="cancelled",
                                                     summary=INTERRUPTED_SUMMARY)
            events.append(_under(task, agent, finished))
        events.append(wev.TurnEndedEvent(reason="cancelled", usage=o.usage, cancel_phase=phase,
                                         error=STOPPED))
        records += [{"type": "event", "turnId": tid, "event": msgspec.to_builtins(e)}
                    for e in events]
        records.append({"type": "end", "turnId": tid, "reason": None, "interrupted": True,
                        "at": o.at})
        return [msgspec.to_builtins(r) for r in records]

    def warn(self, warning: str) -> None:
        self.out.warnings.append(warning)


def _with_thinking(shown: list[Block], thinking: list[tuple[int, Block]]) -> tuple[Block, ...]:
    """The reply as shown, with its signed thinking blocks where they came: each after the
    tool calls that preceded it (before the text that followed it). Thinking that nothing
    shown follows is left out (a reply cannot end in one; if a tool call came before it, that
    call was not shown either)."""
    out: list[Block] = []
    pending = list(thinking)
    tools = 0
    for block in shown:
        while pending and pending[0][0] <= tools:
            out.append(pending.pop(0)[1])
        out.append(block)
        tools += isinstance(block, ToolUseBlock)
    return tuple(out)


def _under(task: str | None, agent: str | None, event: wev.Ev) -> wev.Ev:
    """`event` as it was shown: a sub-agent's is wrapped in the Task call's `agent` event."""
    if task is None:
        return event
    return wev.AgentEventEvent(tool_call_id=task, agent=agent or "", event=event)


def read(path: Path, messages: bool = True, close: bool = True) -> Loaded:
    """Parse a transcript. Bad lines are skipped with a warning. With `messages` and `close`, a
    turn Heddle stopped during is closed (`Loaded.repairs`), so the conversation is valid to
    send: every tool_use answered, every started call finished, every turn ended."""
    with open_regular(path, follow_symlinks=False) as f:  # never a pipe, a device, a link
        head = f.readline(MAX_HEADER + 1)
        if len(head) > MAX_HEADER and not head.endswith(b"\n"):
            raise TranscriptError(f"{path.name} is not a Heddle transcript (its first line is "
                                  f"longer than {MAX_HEADER:,} bytes)")
        raw = head + f.read()
    lines = raw.split(b"\n")
    try:
        first = msgspec.json.decode(lines[0])
    except (msgspec.DecodeError, ValueError, RecursionError):  # (invalid UTF-8, deep nesting)
        raise TranscriptError(f"{path.name} is not a Heddle transcript (no header)") from None
    if not isinstance(first, dict) or first.get("type") != "header":
        raise TranscriptError(f"{path.name} is not a Heddle transcript (no header)")
    if first.get("version") != FORMAT_VERSION:
        raise TranscriptError(f"{path.name} has transcript format version {first.get('version')!r}; "
                              f"this Heddle reads version {FORMAT_VERSION}")
    try:
        header = msgspec.convert(first, Header)
    except msgspec.ValidationError as exc:
        raise TranscriptError(f"{path.name} has an unreadable header: {exc}") from None
    reader = _Reader(header, messages)
    last = len(lines) - 1
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            reader.feed(msgspec.json.decode(line))
        except (msgspec.DecodeError, msgspec.ValidationError, KeyError, TypeError,
                AttributeError, ValueError, RecursionError):  # (invalid UTF-8, deep nesting)
            where = "the last line" if number - 1 == last or not any(
                l.strip() for l in lines[number:]) else f"line {number}"
            reader.warn(f"skipped {where} of {path.name}: it is not a complete record")
    out = reader.out
    if messages and close and reader.open is not None:
        out.repairs = reader.closing()
        for record in out.repairs:
            reader.feed(record)
    out.messages = reader.convo if messages else ()
    return out


def _title(prompt: str) -> str:
    line = one_line(" ".join(prompt.split()), limit=len(prompt) * 10 + 1)
    return line if len(line) <= 80 else line[:77].rstrip() + "..."


def sessions_dir(environ: Mapping[str, str] | None = None) -> Path:
    return state_dir(environ) / "sessions"
