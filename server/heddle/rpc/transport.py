"""Stdio framing for the daemon: a reader thread, and non-blocking writes from the event loop.

The reader accepts `Content-Length` headers in any letter case, skips other headers and
garbage lines, bounds header and body sizes, and hands whole JSON bodies to the loop.

The writer puts each framed message straight into stdout with a non-blocking write on the
loop thread: no thread hop, no lock handoff, and the message is on its way when `write`
returns. What the pipe does not take at once waits in a buffer that drains as the client reads,
so a client that reads slowly never blocks the loop. Above HIGH_WATER buffered bytes the
transport reports back-pressure through `Pressure`; the turn emitters then hold their text
deltas (merging them) until the buffer is below LOW_WATER again. Every other message
(responses, requests, non-delta events) is always buffered at once and in order: nothing is
dropped and nothing overtakes.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import select
import threading
import time
from typing import BinaryIO, Callable

import msgspec

log = logging.getLogger(__name__)

MAX_HEADER_LINE = 8192
MAX_BODY = 64 * 1024 * 1024
HIGH_WATER = 128 * 1024
"""Buffered bytes above which the client counts as behind (the pipe itself holds 64 KiB)."""
LOW_WATER = 32 * 1024
"""Buffered bytes under which it has caught up again."""
MAX_WRITE = 256 * 1024
"""Bytes handed to one write() call when buffered messages are written together."""


class ParseError:
    """Stands in for a body that was not JSON."""

    def __init__(self, reason: str):
        self.reason = reason


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


class Pressure:
    """Whether the client has fallen behind reading stdout, and who to tell when it catches up.

    Used on the event loop thread only. Callbacks registered with `when_relieved` run once, in
    the order they were registered, as soon as the buffer is under LOW_WATER; one that finds
    the client behind again registers anew, so turns take their turn.
    """

    def __init__(self) -> None:
        self.backed_up = False
        self._waiters: list[Callable[[], None]] = []

    def when_relieved(self, callback: Callable[[], None]) -> None:
        self._waiters.append(callback)

    def set(self, backed_up: bool) -> None:
        if backed_up == self.backed_up:
            return
        self.backed_up = backed_up
        if backed_up:
            return
        waiters, self._waiters = self._waiters, []
        while waiters:
            if self.backed_up:  # a callback filled the buffer again: the rest keep their place
                self._waiters = waiters + self._waiters
                return
            callback = waiters.pop(0)
            try:
                callback()
            except Exception:
                log.exception("a back-pressure callback failed")

    async def wait(self) -> None:
        """Return once the client is not behind (at once if it is not)."""
        while self.backed_up:
            future = asyncio.get_running_loop().create_future()
            self.when_relieved(lambda: future.done() or future.set_result(None))
            await future


PRESSURE = Pressure()
"""The process's stdout: what `StdioTransport` reports to and what emitters consult."""


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
                 on_message: Callable[[object], None], on_close: Callable[[str], None],
                 pressure: Pressure | None = None):
        self._stdin = stdin
        self._stdout = stdout
        self._loop = loop
        self._on_message = on_message
        self._on_close = on_close
        self.pressure = PRESSURE if pressure is None else pressure
        self._fd: int | None = None
        self._was_blocking = True
        self._buf: collections.deque[bytes | memoryview] = collections.deque()
        self.buffered = 0
        """Bytes written by the daemon that the client has not taken yet (beyond the pipe)."""
        self.peak_buffered = 0
        self._watching = False
        self._closed = False
        self._loop_thread: int | None = None
        self._reader = threading.Thread(target=self._read_loop, name="heddle-stdin", daemon=True)

    def start(self) -> None:
        self._loop_thread = threading.get_ident()
        try:
            fd = self._stdout.fileno()
            self._stdout.flush()
            self._was_blocking = os.get_blocking(fd)
            os.set_blocking(fd, False)
            self._fd = fd
        except (AttributeError, OSError, ValueError) as exc:  # no real descriptor: plain writes
            log.info("stdout has no descriptor for non-blocking writes (%s)", exc)
        self._reader.start()

    # -- writing ------------------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        """Send one framed message: now, or after what is already buffered."""
        if self._closed:
            return
        if self._loop_thread is not None and threading.get_ident() != self._loop_thread:
            self._call_soon(self.write, data)
            return
        if self._fd is None:
            self._write_plain(data)
            return
        if not self._buf:
            try:
                sent = os.write(self._fd, data)
            except BlockingIOError:
                sent = 0
            except OSError as exc:
                self._broken(exc)
                return
            if sent == len(data):
                return
            data = memoryview(data)[sent:]
            self._watch()
        self._buf.append(data)
        self.buffered += len(data)
        if self.buffered > self.peak_buffered:
            self.peak_buffered = self.buffered
        if self.buffered > HIGH_WATER:
            self.pressure.set(True)

    def _write_plain(self, data: bytes) -> None:
        try:
            self._stdout.write(data)
            self._stdout.flush()
        except (OSError, ValueError) as exc:
            self._broken(exc)

    def _watch(self) -> None:
        if not self._watching:
            self._loop.add_writer(self._fd, self._on_writable)
            self._watching = True

    def _unwatch(self) -> None:
        if self._watching:
            self._loop.remove_writer(self._fd)
            self._watching = False

    def _next_chunk(self) -> bytes | memoryview:
        """The buffer's head, joined with the messages after it up to MAX_WRITE bytes."""
        first = self._buf.popleft()
        if not self._buf or len(first) >= MAX_WRITE:
            return first
        parts, size = [first], len(first)
        while self._buf and size + len(self._buf[0]) <= MAX_WRITE:
            part = self._buf.popleft()
            parts.append(part)
            size += len(part)
        return b"".join(parts)

    def _flush_some(self) -> bool:
        """Write what the pipe takes now; False if the client is gone."""
        while self._buf:
            chunk = self._next_chunk()
            try:
                sent = os.write(self._fd, chunk)
            except BlockingIOError:
                sent = 0
            except OSError as exc:
                self._buf.appendleft(chunk)
                self._broken(exc)
                return False
            self.buffered -= sent
            if sent < len(chunk):
                self._buf.appendleft(memoryview(chunk)[sent:])
                return True
        return True

    def _on_writable(self) -> None:
        if not self._flush_some():
            return
        if not self._buf:
            self._unwatch()
        if self.buffered <= LOW_WATER:
            self.pressure.set(False)

    def _broken(self, exc: BaseException) -> None:
        if self._closed:
            return
        log.warning("client's stdout is gone: %s", exc)
        self._closed = True
        if self._fd is not None:
            self._unwatch()
        self._buf.clear()
        self.buffered = 0
        self.pressure.set(False)
        self._loop.call_soon(self._on_close, "stdout closed")

    def close(self, timeout: float = 2.0) -> None:
        """Write what is buffered (for at most `timeout` seconds), then stop writing."""
        if self._closed:
            return
        self._closed = True
        if self._fd is None:
            return
        self._unwatch()
        deadline = time.monotonic() + timeout
        try:
            while self._buf:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    log.warning("stopped with %d bytes the client did not read", self.buffered)
                    break
                select.select([], [self._fd], [], remaining)
                if not self._flush_some():
                    break
        except (OSError, ValueError) as exc:
            log.warning("flushing stdout failed: %s", exc)
        self._buf.clear()
        self.buffered = 0
        self.pressure.set(False)
        try:
            os.set_blocking(self._fd, self._was_blocking)
        except OSError:
            pass

    # -- reading ------------------------------------------------------------------------------
    def _deliver(self, item: object) -> None:
        self._call_soon(self._on_message, item)

    def _call_soon(self, callback: Callable[..., None], arg: object) -> None:
        try:
            self._loop.call_soon_threadsafe(callback, arg)
        except RuntimeError:  # the loop is closed: the daemon is exiting
            pass

    def _read_loop(self) -> None:
        try:
            self._read_messages()
        except (OSError, ValueError) as exc:
            log.warning("reading stdin failed: %s", exc)
        self._call_soon(self._on_close, "stdin closed")

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
