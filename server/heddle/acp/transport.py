"""Newline-delimited JSON-RPC over stdio for the ACP door: the SDK's `Transport` seam.

The SDK's own stdio transport logs a line that is not JSON and answers nothing, and a batch
or a bare value stops its receive loop. Here every line is either handed to the SDK's
connection as a message object or answered, decoded by the LSP door's rule
(`heddle.rpc.framing.decode_message`): not JSON (invalid UTF-8 included) is `-32700`,
arrays and objects nested more than MAX_DEPTH deep are `-32600`, JSON that is no request,
notification or response is `-32600` (with the id when it had one), and a line over
MAX_LINE is dropped as it arrives and answered `-32700`. The agent keeps serving; warnings
about bad input are rate-limited as on the LSP door (`Complaints`).

stdin is read by a thread (as on the LSP door), so any kind of file works there. Writes are
synchronous and in order (the turn emitters send from callbacks): each message is
encoded once with msgspec and handed to the pipe's asyncio transport. Its buffer above
HIGH_WATER sets the shared `Pressure`, so the turn emitters hold and merge their events while
the client does not read, exactly as on the LSP door.

Reading follows the LSP door's rule (`heddle.rpc.transport.must_pause`): while more than
READ_PAUSE bytes wait in that buffer for the client, or more than MAX_BACKLOG requests were
handed on and not answered yet, no message is handed on and the thread reads no more stdin
(a chunk at most past the mark), so a client that sends and does not read fills its own pipe
instead of the agent's memory; both go on once `may_resume` says so. A paused thread still
looks at whether stdin's other end closed (`hung_up`): then the agent stops, as at the end of
stdin, without handing on what it had not read.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from typing import Any, Callable

import msgspec

from heddle.rpc.framing import BadInput, Complaints, decode_message
from heddle.rpc.transport import (HANGUP_POLL, HIGH_WATER, LOW_WATER, READ_PAUSE, Pressure,
                                  hung_up, may_resume, must_pause)

log = logging.getLogger(__name__)

MAX_LINE = 64 * 1024 * 1024
"""Longest line read (the LSP door's body limit)."""
CLOSE_TIMEOUT = 5.0
PARSE_ERROR = -32700
INVALID_REQUEST = -32600

_encoder = msgspec.json.Encoder(enc_hook=str)  # the SDK's validation errors hold exceptions
_decoder = msgspec.json.Decoder()


def error(id_: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message}}


def check(message: Any) -> dict[str, Any] | None:
    """The JSON-RPC error answering a decoded line that is no message; None if it is one."""
    if not isinstance(message, dict):
        return error(None, INVALID_REQUEST, "invalid request: a message is a JSON object "
                     f"(got a JSON {type(message).__name__}; batches are not supported)")
    id_ = message.get("id")
    if "id" in message and not isinstance(id_, (str, int)) or isinstance(id_, bool):
        return error(None, INVALID_REQUEST, "invalid request: `id` must be a string or an "
                     "integer")
    method = message.get("method")
    if method is None:
        if "id" in message and ("result" in message or "error" in message):
            return None  # a response to one of the agent's requests
        return error(id_, INVALID_REQUEST, "invalid request: no `method`, and not a response")
    if not isinstance(method, str):
        return error(id_, INVALID_REQUEST, "invalid request: `method` must be a string")
    params = message.get("params")
    if params is not None and not isinstance(params, (dict, list)):
        return error(id_, INVALID_REQUEST, "invalid request: `params` must be an object")
    return None


class _Writer(asyncio.Protocol):
    def __init__(self, pressure: Pressure):
        self.pressure = pressure
        self.lost = asyncio.get_running_loop().create_future()
        self.on_drained: Callable[[], None] = lambda: None

    def pause_writing(self) -> None:
        self.pressure.set(True)

    def resume_writing(self) -> None:
        self.pressure.set(False)
        self.on_drained()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(exc)


def _feed_from_thread(loop: asyncio.AbstractEventLoop, reader: asyncio.StreamReader,
                      transport: StdioTransport) -> None:
    """Read stdin for `transport`: a chunk, then nothing until the loop has taken it and there
    is room (`transport.room`); meanwhile, watch for stdin's other end closing."""
    fd = sys.stdin.fileno()
    room = transport.room

    def read() -> None:
        # os.read, not sys.stdin.buffer: a thread blocked in a buffered read holds its lock,
        # and the interpreter aborts at exit when it cannot take it
        try:
            while True:
                while not room.wait(HANGUP_POLL):
                    if transport.paused and hung_up(fd):
                        loop.call_soon_threadsafe(transport.hung_up)
                        return
                data = os.read(fd, 1 << 16)
                if not data:
                    break
                room.clear()
                loop.call_soon_threadsafe(transport.feed, data)
            loop.call_soon_threadsafe(reader.feed_eof)
        except RuntimeError:  # the loop is closed: the agent is exiting
            pass
        except OSError as exc:
            log.warning("reading stdin failed: %s", exc)
            try:
                loop.call_soon_threadsafe(reader.feed_eof)
            except RuntimeError:
                pass
    threading.Thread(target=read, name="acp-stdin", daemon=True).start()


class _FileOut:
    """stdout that is a regular file: written at once (a file never blocks for long)."""

    def __init__(self, writer: _Writer):
        self._writer = writer
        self._closed = False

    def write(self, data: bytes) -> None:
        try:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        except (OSError, ValueError) as exc:
            log.warning("writing stdout failed: %s", exc)
            self.close()

    def is_closing(self) -> bool:
        return self._closed

    def get_write_buffer_size(self) -> int:
        return 0

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._writer.connection_lost(None)

    abort = close


class StdioTransport:
    """One message per line on stdin and stdout (ACP's framing)."""

    def __init__(self, reader: asyncio.StreamReader, out: asyncio.WriteTransport,
                 writer: _Writer, room: threading.Event | None = None):
        self._reader = reader
        self._out = out
        self._writer = writer
        self.pressure = writer.pressure
        self.bad_lines = 0
        self.complaints = Complaints()
        self.room = room or threading.Event()
        """Set while stdin may be read: the loop has taken the last chunk, and reading is not
        paused (the reader thread waits for it)."""
        self.room.set()
        self.paused = False
        self._relief = asyncio.Event()
        self._relief.set()
        """Set while messages may be handed on."""
        self.unanswered = 0
        """Requests handed on whose answer has not been written yet."""
        self._stalled = False
        """Paused because the client left too many bytes unread (not only the backlog)."""
        self.pauses = 0
        self._gone = False
        """stdin's other end closed while it was not read."""
        writer.on_drained = self._check_room

    @classmethod
    async def open(cls, pressure: Pressure | None = None) -> StdioTransport:
        """On stdin and stdout. stdin is read by a thread, whatever it is (a pipe, a regular
        file, /dev/null, which epoll refuses); a regular file as stdout is written directly,
        since asyncio's pipe transports take only pipes, sockets and terminals."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=MAX_LINE)
        writer = _Writer(pressure or Pressure())
        try:
            out, _ = await loop.connect_write_pipe(lambda: writer, sys.stdout)
            out.set_write_buffer_limits(high=HIGH_WATER, low=LOW_WATER)
        except (ValueError, OSError):
            out = _FileOut(writer)
        transport = cls(reader, out, writer)
        _feed_from_thread(loop, reader, transport)
        return transport

    def write(self, message: dict[str, Any]) -> None:
        """Queue one message now (in order with every other write)."""
        if "method" not in message and "id" in message and self.unanswered:
            self.unanswered -= 1  # an answer to a request that was handed on
            self._check_room()
        self._put(message)

    def _put(self, message: dict[str, Any]) -> None:
        if self._out.is_closing():
            return
        self._out.write(_encoder.encode(message) + b"\n")
        if not self._stalled and self._out.get_write_buffer_size() > READ_PAUSE:
            self._check_room()

    # -- back-pressure on stdin ---------------------------------------------------------------
    def feed(self, data: bytes) -> None:
        """On the loop: a chunk the reader thread read. The next is read once the messages in
        this one have been handed on (the callback runs after `receive`'s task took them)."""
        self._reader.feed_data(data)
        asyncio.get_running_loop().call_soon(self._taken)

    def _taken(self) -> None:
        self._check_room()
        if not self.paused:
            self.room.set()

    def _check_room(self) -> None:
        """Pause or resume reading by the shared rule (on the loop, after each change)."""
        buffered = self._out.get_write_buffer_size()
        if not self.paused:
            if must_pause(buffered, self.unanswered):
                self.paused, self._stalled = True, buffered > READ_PAUSE
                self.pauses += 1
                self._relief.clear()
                log.info("stdin is not read: %d bytes wait for the client to read them, %d "
                         "requests for their answers", buffered, self.unanswered)
        elif may_resume(buffered, self.unanswered, self._stalled):
            self.paused = self._stalled = False
            self._relief.set()
            self.room.set()
            log.info("reading stdin again")

    def hung_up(self) -> None:
        log.warning("stdin closed while it was not read (%d bytes waited for the client, %d "
                    "requests for their answers)", self._out.get_write_buffer_size(),
                    self.unanswered)
        self._gone = True
        self._relief.set()

    async def send(self, message: dict[str, Any]) -> None:
        if self._out.is_closing():
            raise ConnectionError("stdout is closed")
        self.write(message)

    async def receive(self) -> dict[str, Any] | None:
        """The next message; None at the end of stdin (or once its other end closed while it
        was not read). Bad lines are answered here."""
        while True:
            await self._relief.wait()
            line = None if self._gone else await self._line()
            if line is None:
                self.complaints.flush()
                return None
            if not line.strip():
                continue
            message = decode_message(line, _decoder.decode)
            if isinstance(message, BadInput):
                self._bad(message.reply())
                continue
            problem = check(message)
            if problem is not None:
                self._bad(problem)
                continue
            if "method" in message and "id" in message:
                self.unanswered += 1
                self._check_room()
            return message

    async def _line(self) -> bytes | None:
        try:
            line = await self._reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:
            return exc.partial or None  # a last line without a newline still counts
        except asyncio.LimitOverrunError:
            # drop the long line as it arrives, up to its newline
            while True:
                try:
                    await self._reader.readuntil(b"\n")
                    break
                except asyncio.LimitOverrunError as exc:
                    await self._reader.readexactly(exc.consumed)
                except asyncio.IncompleteReadError:
                    break
            self._bad(error(None, PARSE_ERROR, f"parse error: a line over {MAX_LINE} bytes "
                            "was dropped"))
            return b""
        return line

    def _bad(self, answer: dict[str, Any]) -> None:
        self.bad_lines += 1
        self.complaints.refused(answer["error"]["message"][:200])
        self._put(answer)

    async def close(self) -> None:
        """Write what is queued, for at most CLOSE_TIMEOUT seconds, then drop the rest (a
        client that reads nothing never lets it out)."""
        if not self._out.is_closing():
            self._out.close()
        try:
            await asyncio.wait_for(asyncio.shield(self._writer.lost), CLOSE_TIMEOUT)
        except (asyncio.TimeoutError, Exception):
            log.warning("stopped with %d bytes the client did not read",
                        self._out.get_write_buffer_size())
            self._out.abort()
