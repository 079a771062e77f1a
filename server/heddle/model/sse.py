"""The Messages API's streamed answer, from raw bytes to StreamEvents.

`SSEDecoder` splits the body into server-sent events (any of the three line endings, multi-line
`data:`, comments); `Assembler` decodes each event's JSON with msgspec and turns the events into
StreamEvents, merging the text (or thinking) deltas of one block that arrive together into one
chunk. Event, block and delta types it does not know are skipped, as the API asks of clients.
"""

from __future__ import annotations

import msgspec

from heddle.core.events import Usage
from heddle.core.messages import (Block, RedactedThinkingBlock, TextBlock, ThinkingBlock,
                                  ToolUseBlock)
from heddle.core.stream import (BlockDone, BlockStarted, StreamEnd, StreamEvent, TextChunk,
                                ThinkingChunk)
from heddle.model.errors import StreamIncomplete, StreamUnreadable

_BOM = b"\xef\xbb\xbf"


class SSEDecoder:
    """Splits a byte stream into `(event name, data)` pairs, both bytes.

    An event ends at a blank line; lines end with LF, CRLF or CR, even when a CRLF is split
    between two reads. An event cut off by the end of the stream is dropped, as the SSE spec says.
    """

    def __init__(self) -> None:
        self._rest = b""
        self._after_cr = False
        self._started = False

    def feed(self, chunk: bytes) -> list[tuple[bytes, bytes]]:
        if self._after_cr and chunk:
            self._after_cr = False
            if chunk.startswith(b"\n"):
                chunk = chunk[1:]  # the second half of a CRLF whose CR ended the last read
        if b"\r" in chunk:
            self._after_cr = chunk.endswith(b"\r")
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        text = self._rest + chunk if self._rest else chunk
        if not self._started:
            if len(text) < 3 and _BOM.startswith(text):
                self._rest = text  # maybe the start of a byte order mark
                return []
            self._started = True
            if text.startswith(_BOM):
                text = text[3:]
        if b"\n\n" not in text:
            self._rest = text
            return []
        *blocks, self._rest = text.split(b"\n\n")
        events = []
        for block in blocks:
            nl = block.find(b"\n")
            if (nl > 0 and block.startswith(b"event: ") and block.startswith(b"data: ", nl + 1)
                    and block.find(b"\n", nl + 1) < 0):
                events.append((block[7:nl], block[nl + 7:]))  # the usual shape, the fast way
                continue
            name = b""
            data: list[bytes] = []
            for line in block.split(b"\n"):
                if not line or line[0] == 58:  # b":" starts a comment
                    continue
                field, _, value = line.partition(b":")
                if value[:1] == b" ":
                    value = value[1:]
                if field == b"data":
                    data.append(value)
                elif field == b"event":
                    name = value
            if data or name == b"error":
                events.append((name, data[0] if len(data) == 1 else b"\n".join(data)))
        return events


# -- the JSON of the events, only the fields read (msgspec skips the rest) ---------------------

class _CacheCreation(msgspec.Struct, gc=False):
    ephemeral_5m_input_tokens: int = 0
    ephemeral_1h_input_tokens: int = 0


class _Usage(msgspec.Struct, gc=False):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cache_creation: _CacheCreation | None = None

    def creation(self) -> int | None:
        """Tokens written to the cache: the total, else the sum of its per-lifetime split."""
        if self.cache_creation_input_tokens is not None:
            return self.cache_creation_input_tokens
        c = self.cache_creation
        return None if c is None else c.ephemeral_5m_input_tokens + c.ephemeral_1h_input_tokens


class _AppliedEdit(msgspec.Struct, gc=False):
    cleared_input_tokens: int = 0


class _ContextManagement(msgspec.Struct, gc=False):
    applied_edits: list[_AppliedEdit] = []


class _Message(msgspec.Struct, gc=False):
    usage: _Usage | None = None


class _Block(msgspec.Struct, gc=False):
    type: str
    id: str = ""
    name: str = ""
    data: str = ""


class _Delta(msgspec.Struct, gc=False):
    """A content block's delta (by `type`) or the message's (`stop_reason`)."""

    type: str = ""
    text: str = ""
    partial_json: str = ""
    thinking: str = ""
    signature: str = ""
    stop_reason: str | None = None


class _Event(msgspec.Struct, gc=False):
    type: str
    index: int = -1
    delta: _Delta | None = None
    content_block: _Block | None = None
    message: _Message | None = None
    usage: _Usage | None = None
    context_management: _ContextManagement | None = None


class _TypeOnly(msgspec.Struct):
    type: str = ""


_decode_event = msgspec.json.Decoder(_Event).decode
_decode_type = msgspec.json.Decoder(_TypeOnly).decode
_KNOWN = frozenset({"message_start", "content_block_start", "content_block_delta",
                    "content_block_stop", "message_delta", "message_stop", "error"})


def _known(data: bytes) -> bool:
    """Whether this event's JSON is an object whose `type` this client reads."""
    try:
        return _decode_type(data).type in _KNOWN
    except msgspec.DecodeError:
        return False
_BLOCK_KINDS = frozenset({"text", "thinking", "redacted_thinking", "tool_use"})


class ErrorEvent(msgspec.Struct, frozen=True):
    """An `error` event: its body (the decoded JSON, or the raw text) and the SDK's message."""

    body: object
    message: str


def error_event(data: bytes) -> ErrorEvent:
    try:
        body = msgspec.json.decode(data)
    except msgspec.DecodeError:
        text = data.decode("utf-8", "replace")
        return ErrorEvent(text, text or "Error code: 200")
    return ErrorEvent(body, f"{body}")


class _Builder:
    """Accumulates one content block from its deltas."""

    __slots__ = ("kind", "start", "parts", "signature")

    def __init__(self, kind: str, start: _Block):
        self.kind = kind
        self.start = start
        self.parts: list[str] = []
        self.signature = ""

    def finish(self) -> tuple[Block, str | None]:
        text = "".join(self.parts)
        if self.kind == "tool_use":
            try:
                value = msgspec.json.decode(text) if text.strip() else {}
            except msgspec.DecodeError as exc:
                return ToolUseBlock(self.start.id, self.start.name, {}), f"invalid JSON: {exc}"
            if not isinstance(value, dict):
                return ToolUseBlock(self.start.id, self.start.name, {}), "input is not an object"
            return ToolUseBlock(self.start.id, self.start.name, value), None
        if self.kind == "thinking":
            return ThinkingBlock(text, self.signature), None
        if self.kind == "redacted_thinking":
            return RedactedThinkingBlock(self.start.data), None
        return TextBlock(text), None


class Assembler:
    """One response's events in, StreamEvents out; completed blocks also go to `done`.

    `feed` takes the events of one read. Adjacent text deltas of one block become one TextChunk
    (thinking likewise), so the loop handles one chunk per read instead of one per delta. After
    an `error` event, `error` is set and the rest of the response is ignored.
    """

    def __init__(self, done: list[Block]) -> None:
        self.done = done
        self.error: ErrorEvent | None = None
        self.failure: StreamUnreadable | None = None
        """Set when an event of a known type could not be decoded; the rest is ignored."""
        self._builders: dict[int, _Builder] = {}
        self._usage_in: _Usage | None = None
        self._usage_end: _Usage | None = None
        self._cleared = 0
        self._stop_reason: str | None = None
        self._saw_stop = False

    def feed(self, events: list[tuple[bytes, bytes]]) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        run: list[str] = []  # text of the current run of mergeable deltas
        run_index = -1
        run_thinking = False
        for name, data in events:
            if self.error is not None or self.failure is not None:
                break
            if name == b"error":
                self.error = error_event(data)
                break
            try:
                ev = _decode_event(data)
            except msgspec.DecodeError as exc:
                if isinstance(exc, msgspec.ValidationError) and not _known(data):
                    continue  # an event type this client does not know, shaped its own way
                # what came before it in this read still goes out; the caller raises this
                self.failure = StreamUnreadable(f"an event could not be read ({exc})")
                break
            kind = ev.type
            if kind == "content_block_delta" and ev.delta is not None:
                delta = ev.delta
                b = self._builders.get(ev.index)
                if b is None:
                    continue  # a block of a kind this client skips
                dtype = delta.type
                if dtype == "text_delta" or dtype == "thinking_delta":
                    piece = delta.text if dtype == "text_delta" else delta.thinking
                    b.parts.append(piece)
                    thinking = dtype == "thinking_delta"
                    if run and (run_index != ev.index or run_thinking != thinking):
                        out.append(_chunk(run_index, run_thinking, run))
                        run = []
                    run.append(piece)
                    run_index, run_thinking = ev.index, thinking
                    continue
                if dtype == "input_json_delta":
                    b.parts.append(delta.partial_json)
                elif dtype == "signature_delta":
                    b.signature += delta.signature
                continue  # no event for these (nor for delta types unknown here)
            if run:
                out.append(_chunk(run_index, run_thinking, run))
                run = []
            if kind == "message_start":
                if ev.message is not None:
                    self._usage_in = ev.message.usage
            elif kind == "content_block_start":
                block = ev.content_block
                if block is None or block.type not in _BLOCK_KINDS:
                    continue
                self._builders[ev.index] = _Builder(block.type, block)
                if block.type == "tool_use":
                    out.append(BlockStarted(ev.index, block.type, block.id, block.name))
                else:
                    out.append(BlockStarted(ev.index, block.type))
            elif kind == "content_block_stop":
                builder = self._builders.pop(ev.index, None)
                if builder is not None:
                    block_done, input_error = builder.finish()
                    self.done.append(block_done)
                    out.append(BlockDone(ev.index, block_done, input_error))
            elif kind == "message_delta":
                if ev.delta is not None:
                    self._stop_reason = ev.delta.stop_reason
                if ev.usage is not None:
                    self._usage_end = ev.usage
                if ev.context_management is not None:
                    self._cleared = sum(e.cleared_input_tokens
                                        for e in ev.context_management.applied_edits)
            elif kind == "message_stop":
                self._saw_stop = True
            elif kind == "error":  # an error body without the `event: error` line
                self.error = error_event(data)
                break
        if run:
            out.append(_chunk(run_index, run_thinking, run))
        return out

    def end(self, model_calls: int) -> StreamEnd:
        """The response's StreamEnd; StreamIncomplete when it never said `message_stop`."""
        if not self._saw_stop:
            raise StreamIncomplete("no message_stop")
        return StreamEnd(self._stop_reason, self.usage(model_calls), self._cleared)

    @property
    def started(self) -> bool:
        """Whether `message_start` came (and with it the input tokens it is billed for)."""
        return self._usage_in is not None

    def usage(self, model_calls: int = 0) -> Usage:
        """The tokens the response reported so far (all of them, once it ended; a response
        that broke off is billed for what its `message_start` and `message_delta` said)."""
        start, end = self._usage_in or _Usage(), self._usage_end or _Usage()

        def latest(field: str) -> int:
            # message_delta's usage is cumulative and final where it has a field; the input
            # and cache counts usually come only with message_start
            value = getattr(end, field)
            return (value if value is not None else getattr(start, field)) or 0

        creation = end.creation()
        return Usage(
            input_tokens=latest("input_tokens"),
            output_tokens=latest("output_tokens"),
            cache_read_input_tokens=latest("cache_read_input_tokens"),
            cache_creation_input_tokens=(creation if creation is not None
                                         else start.creation()) or 0,
            model_calls=model_calls)


def _chunk(index: int, thinking: bool, parts: list[str]) -> TextChunk | ThinkingChunk:
    text = parts[0] if len(parts) == 1 else "".join(parts)
    return ThinkingChunk(index, text) if thinking else TextChunk(index, text)
