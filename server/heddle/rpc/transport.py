"""Stdio framing for the daemon: a reader thread and a writer thread around the event loop.

The reader accepts `Content-Length` headers in any letter case, skips other headers and
garbage lines, bounds header and body sizes, and hands whole JSON bodies to the loop. The
writer drains a queue so a client that reads slowly never blocks the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import threading
from typing import BinaryIO, Callable

import msgspec

log = logging.getLogger(__name__)

MAX_HEADER_LINE = 8192
MAX_BODY = 64 * 1024 * 1024


class ParseError:
    """Stands in for a body that was not JSON."""

    def __init__(self, reason: str):
        self.reason = reason


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


class FdReader:
    """Buffered reads straight from a file descriptor.

    Unlike sys.stdin.buffer it holds no lock, so a thread blocked in it cannot stall
    interpreter shutdown.
    """

    def __init__(self, fd: int):
        self._fd = fd
        self._buf = bytearray()
        self._eof = False

    def _fill(self) -> bool:
        if self._eof:
            return False
        chunk = os.read(self._fd, 1 << 16)
        if not chunk:
            self._eof = True
            return False
        self._buf += chunk
        return True

    def readline(self, limit: int) -> bytes:
        while True:
            end = self._buf.find(b"\n", 0, limit)
            if end >= 0:
                return self._take(end + 1)
            if len(self._buf) >= limit or not self._fill():
                return self._take(min(limit, len(self._buf)))

    def read(self, n: int) -> bytes:
        if not self._buf:
            self._fill()
        return self._take(min(n, len(self._buf)))

    def _take(self, n: int) -> bytes:
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out


class StdioTransport:
    def __init__(self, stdin: BinaryIO | FdReader, stdout: BinaryIO, loop: asyncio.AbstractEventLoop,
                 on_message: Callable[[object], None], on_close: Callable[[str], None]):
        self._stdin = stdin
        self._stdout = stdout
        self._loop = loop
        self._on_message = on_message
        self._on_close = on_close
        self._out: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._closed = False
        self._reader = threading.Thread(target=self._read_loop, name="heddle-stdin", daemon=True)
        self._writer = threading.Thread(target=self._write_loop, name="heddle-stdout", daemon=True)

    def start(self) -> None:
        self._reader.start()
        self._writer.start()

    # -- writing ------------------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        """Queue one framed message (called on the loop thread)."""
        if not self._closed:
            self._out.put(data)

    def close(self, timeout: float = 2.0) -> None:
        """Flush what is queued (bounded), then stop writing."""
        if self._closed:
            return
        self._closed = True
        self._out.put(None)
        self._writer.join(timeout)

    def _write_loop(self) -> None:
        while True:
            data = self._out.get()
            if data is None:
                break
            try:
                self._stdout.write(data)
                while not self._out.empty():  # batch whatever else is ready, then flush once
                    more = self._out.get_nowait()
                    if more is None:
                        self._stdout.flush()
                        return
                    self._stdout.write(more)
                self._stdout.flush()
            except (BrokenPipeError, OSError, ValueError) as exc:
                log.warning("client's stdout is gone: %s", exc)
                self._closed = True
                self._loop.call_soon_threadsafe(self._on_close, "stdout closed")
                return

    # -- reading ------------------------------------------------------------------------------
    def _deliver(self, item: object) -> None:
        self._loop.call_soon_threadsafe(self._on_message, item)

    def _read_loop(self) -> None:
        try:
            self._read_messages()
        except (OSError, ValueError) as exc:
            log.warning("reading stdin failed: %s", exc)
        self._loop.call_soon_threadsafe(self._on_close, "stdin closed")

    def _read_messages(self) -> None:
        stream = self._stdin
        length: int | None = None
        while True:
            line = stream.readline(MAX_HEADER_LINE)
            if not line:
                return
            if line in (b"\r\n", b"\n"):
                if length is None:
                    continue
                body = self._read_exactly(length)
                if body is None:
                    return
                length = None
                try:
                    self._deliver(msgspec.json.decode(body))
                except msgspec.DecodeError as exc:
                    self._deliver(ParseError(str(exc)))
                continue
            name, sep, value = line.partition(b":")
            if not sep:
                log.warning("ignoring a line that is not a header: %r", line[:80])
                length = None
                continue
            if name.strip().lower() == b"content-length":
                try:
                    length = int(value.strip())
                except ValueError:
                    log.warning("bad Content-Length %r", value[:40])
                    length = None
                    continue
                if length < 0 or length > MAX_BODY:
                    log.warning("refusing a %d byte message", length)
                    self._skip(length if length > 0 else 0)
                    self._deliver(ParseError(f"message of {length} bytes is too large"))
                    length = None

    def _read_exactly(self, n: int) -> bytes | None:
        chunks, remaining = [], n
        while remaining:
            chunk = self._stdin.read(remaining)
            if not chunk:
                return None
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    def _skip(self, n: int) -> None:
        while n > 0:
            chunk = self._stdin.read(min(n, 1 << 20))
            if not chunk:
                return
            n -= len(chunk)
