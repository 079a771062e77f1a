"""Newline-delimited JSON-RPC over stdio for the ACP door: the SDK's `Transport` seam.

The SDK's own stdio transport logs a line that is not JSON and answers nothing, and a batch
or a bare value stops its receive loop. Here every line is either handed to the SDK's
connection as a message object or answered: not JSON is `-32700`, JSON that is no request,
notification or response is `-32600` (with the id when it had one), and a line over
MAX_LINE is dropped as it arrives and answered `-32700`. The agent keeps serving.

stdin is read by a thread (as on the LSP door), so any kind of file works there. Writes are
synchronous and in order (the turn emitters send from callbacks): each message is
encoded once with msgspec and handed to the pipe's asyncio transport. Its buffer above
HIGH_WATER sets the shared `Pressure`, so the turn emitters hold and merge their events while
the client does not read, exactly as on the LSP door.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from typing import Any

import msgspec

from heddle.rpc.transport import HIGH_WATER, LOW_WATER, Pressure

log = logging.getLogger(__name__)

MAX_LINE = 64 * 1024 * 1024
"""Longest line read (the LSP door's body limit)."""
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

    def pause_writing(self) -> None:
        self.pressure.set(True)

    def resume_writing(self) -> None:
        self.pressure.set(False)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(exc)


def _feed_from_thread(loop: asyncio.AbstractEventLoop, reader: asyncio.StreamReader) -> None:
    fd = sys.stdin.fileno()

    def read() -> None:
        # os.read, not sys.stdin.buffer: a thread blocked in a buffered read holds its lock,
        # and the interpreter aborts at exit when it cannot take it
        try:
            while data := os.read(fd, 1 << 16):
                loop.call_soon_threadsafe(reader.feed_data, data)
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

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._writer.connection_lost(None)


class StdioTransport:
    """One message per line on stdin and stdout (ACP's framing)."""

    def __init__(self, reader: asyncio.StreamReader, out: asyncio.WriteTransport,
                 writer: _Writer):
        self._reader = reader
        self._out = out
        self._writer = writer
        self.pressure = writer.pressure
        self.bad_lines = 0

    @classmethod
    async def open(cls, pressure: Pressure | None = None) -> StdioTransport:
        """On stdin and stdout. stdin is read by a thread, whatever it is (a pipe, a regular
        file, /dev/null, which epoll refuses); a regular file as stdout is written directly,
        since asyncio's pipe transports take only pipes, sockets and terminals."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=MAX_LINE)
        _feed_from_thread(loop, reader)
        writer = _Writer(pressure or Pressure())
        try:
            out, _ = await loop.connect_write_pipe(lambda: writer, sys.stdout)
            out.set_write_buffer_limits(high=HIGH_WATER, low=LOW_WATER)
        except (ValueError, OSError):
            out = _FileOut(writer)
        return cls(reader, out, writer)

    def write(self, message: dict[str, Any]) -> None:
        """Queue one message now (in order with every other write)."""
        if self._out.is_closing():
            return
        self._out.write(_encoder.encode(message) + b"\n")

    async def send(self, message: dict[str, Any]) -> None:
        if self._out.is_closing():
            raise ConnectionError("stdout is closed")
        self.write(message)

    async def receive(self) -> dict[str, Any] | None:
        """The next message; None at the end of stdin. Bad lines are answered here."""
        while True:
            line = await self._line()
            if line is None:
                return None
            if not line.strip():
                continue
            try:
                message = _decoder.decode(line)
            except msgspec.DecodeError as exc:
                self._bad(error(None, PARSE_ERROR, f"parse error: the line is not JSON ({exc})"))
                continue
            problem = check(message)
            if problem is not None:
                self._bad(problem)
                continue
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
        log.warning("bad input: %s", answer["error"]["message"][:200])
        self.write(answer)

    async def close(self) -> None:
        if not self._out.is_closing():
            self._out.close()
        try:
            await asyncio.wait_for(asyncio.shield(self._writer.lost), 5)
        except (asyncio.TimeoutError, Exception):
            pass
