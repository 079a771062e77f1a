"""Transcripts: one append-only JSONL file per session, written as things become final.

Line 1 is a header (format version, session id, workspace, model, creation time). Then one
line per record, flushed as it is written, so a crash loses nothing that was already shown:

    {"type": "turn", "turnId", "prompt", "at"}             a turn started
    {"type": "message", "turnId", "message"}               conversation content became final
    {"type": "event", "turnId", "event"}                   an event as the editor was sent it
    {"type": "compacted", "turnId", "messages"}            the history was replaced by a summary
    {"type": "end", "turnId", "reason", "usage", "at"}     a turn ended

User messages are appended with the conversation's merge rule (a user message after a user
message joins it), so replaying the lines rebuilds exactly the conversation the model saw.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from heddle.loop.events import Usage
from heddle.loop.messages import (Message, TextBlock, ToolResultBlock, append_user,
                                  missing_tool_results)

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
INTERRUPTED_RESULT = ("The session was interrupted (Heddle stopped) while this tool call was "
                      "running; its effect is unknown. Check before relying on it.")
INTERRUPTED_TEXT = "[The session was interrupted here: Heddle stopped before the turn ended.]"


class TranscriptError(Exception):
    """A transcript that cannot be loaded (unknown format version, not a transcript)."""


class Header(msgspec.Struct, frozen=True):
    version: int
    session_id: str
    workspace: str
    model: str
    created_at: float
    permission_mode: str = "default"
    type: str = "header"


_encoder = msgspec.json.Encoder()


class TranscriptWriter:
    """Appends records to one session's file; each write is flushed before it returns."""

    def __init__(self, path: Path, header: Header | None = None):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(path, "ab", buffering=0)
        if header is not None:
            self._write(header)

    def _write(self, record: Any) -> None:
        try:
            self._file.write(_encoder.encode(record) + b"\n")
        except OSError as exc:  # a full disk must not end the turn; the log says what was lost
            log.error("cannot write transcript %s: %s", self.path, exc)

    def turn(self, turn_id: str, prompt: str) -> None:
        self._write({"type": "turn", "turnId": turn_id, "prompt": prompt, "at": time.time()})

    def message(self, turn_id: str, message: Message) -> None:
        self._write({"type": "message", "turnId": turn_id, "message": message})

    def event(self, turn_id: str, event: Any) -> None:
        self._write({"type": "event", "turnId": turn_id, "event": event})

    def compacted(self, turn_id: str, messages: tuple[Message, ...]) -> None:
        self._write({"type": "compacted", "turnId": turn_id, "messages": messages})

    def end(self, turn_id: str, reason: str, usage: Usage) -> None:
        self._write({"type": "end", "turnId": turn_id, "reason": reason, "usage": usage,
                     "at": time.time()})

    def close(self) -> None:
        self._file.close()


@dataclass
class Loaded:
    header: Header
    messages: tuple[Message, ...] = ()
    events: list[tuple[str, Any]] = field(default_factory=list)
    """(turn id, event) in the order they were sent."""
    turns: int = 0
    title: str = ""
    last_reason: str | None = None
    updated_at: float = 0.0
    warnings: list[str] = field(default_factory=list)
    open_turn: str | None = None
    """The turn that never ended (the daemon stopped during it), if any."""


_message = msgspec.json.Decoder(Message)


def read(path: Path, messages: bool = True) -> Loaded:
    """Parse a transcript. Bad lines are skipped with a warning; the result is repaired so the
    conversation is valid to send (every tool_use answered)."""
    with open(path, "rb") as f:
        raw = f.read()
    lines = raw.split(b"\n")
    try:
        first = msgspec.json.decode(lines[0])
    except msgspec.DecodeError:
        raise TranscriptError(f"{path.name} is not a Heddle transcript (no header)") from None
    if not isinstance(first, dict) or first.get("type") != "header":
        raise TranscriptError(f"{path.name} is not a Heddle transcript (no header)")
    if first.get("version") != FORMAT_VERSION:
        raise TranscriptError(f"{path.name} has transcript format version {first.get('version')!r}; "
                              f"this Heddle reads version {FORMAT_VERSION}")
    header = msgspec.convert(first, Header)
    out = Loaded(header, updated_at=header.created_at)
    convo: tuple[Message, ...] = ()
    partial: list[str] = []  # text shown since the last final message: a reply cut by a crash
    last = len(lines) - 1
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            record = msgspec.json.decode(line)
            kind = record["type"]
        except (msgspec.DecodeError, KeyError, TypeError):
            where = "the last line" if number - 1 == last or not any(
                l.strip() for l in lines[number:]) else f"line {number}"
            out.warnings.append(f"skipped {where} of {path.name}: it is not a complete record")
            continue
        if kind == "turn":
            out.turns += 1
            out.open_turn = record["turnId"]
            out.title = out.title or _title(record.get("prompt", ""))
            out.updated_at = record.get("at", out.updated_at)
        elif kind == "end":
            out.last_reason = record.get("reason")
            out.open_turn = None
            out.updated_at = record.get("at", out.updated_at)
        elif kind == "event":
            event = record.get("event")
            out.events.append((record.get("turnId", ""), event))
            kind_of = event.get("kind") if isinstance(event, dict) else None
            if kind_of == "textDelta":
                partial.append(event.get("text", ""))
            elif kind_of in ("modelCall", "tombstone"):
                partial.clear()
        elif messages and kind == "message":
            partial.clear()
            message = msgspec.convert(record["message"], Message)
            convo = (append_user(convo, message.content) if message.role == "user"
                     else convo + (message,))
        elif messages and kind == "compacted":
            convo = tuple(msgspec.convert(record["messages"], list[Message]))
    out.messages = repair(convo, out, "".join(partial)) if messages else ()
    return out


def repair(messages: tuple[Message, ...], loaded: Loaded, partial_text: str = ""
           ) -> tuple[Message, ...]:
    """Close what a crash left open: a reply that was streaming is kept as far as it was shown,
    and unanswered tool calls get a result saying so."""
    if loaded.open_turn is not None and partial_text.strip() and (
            not messages or messages[-1].role == "user"):
        messages = messages + (Message("assistant", (TextBlock(partial_text),)),)
        loaded.warnings.append("a reply was being written when Heddle stopped; it is kept as "
                               "far as it was shown")
    missing = missing_tool_results(messages)
    if missing:
        results = tuple(ToolResultBlock(b.id, INTERRUPTED_RESULT, True) for b in missing)
        messages = append_user(messages, results + (TextBlock(INTERRUPTED_TEXT),))
        loaded.warnings.append(f"{len(missing)} tool call(s) were running when Heddle stopped; "
                               "they were marked as interrupted")
    elif loaded.open_turn is not None:
        messages = append_user(messages, (TextBlock(INTERRUPTED_TEXT),))
    return messages


def _title(prompt: str) -> str:
    line = " ".join(prompt.split())
    return line if len(line) <= 80 else line[:77].rstrip() + "..."


def sessions_dir(state_home: str | None = None) -> Path:
    base = state_home or os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(base) / "heddle" / "sessions"
