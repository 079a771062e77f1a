"""Stdio framing for the daemon: a reader thread and a writer thread around the event loop.

The reader accepts `Content-Length` headers in any letter case, skips other headers and
garbage lines, bounds header and body sizes, and hands whole JSON bodies to the loop.

`write` queues a framed message and returns; the writer thread writes what is queued, batched,
so a client that reads slowly never blocks the loop, and the loop never waits in a write
(a write to a pipe the editor waits on often hands the CPU to the editor for a while; that
pause lands on the writer thread). The transport counts the bytes queued and not yet written:
above HIGH_WATER it reports back-pressure through `Pressure`, and the turn emitters keep
their events (text merged) until the count is under LOW_WATER again. Responses, requests and
anything else written directly are always queued at once and in order: nothing is dropped and
nothing overtakes.
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
HIGH_WATER = 128 * 1024
"""Queued bytes above which the client counts as behind (the pipe itself holds 64 KiB)."""
LOW_WATER = 32 * 1024
"""Queued bytes under which it has caught up again."""
MAX_WRITE = 256 * 1024
"""Bytes the writer thread hands to one write() when queued messages are written together."""


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
        self._out: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self.buffered = 0
        """Bytes queued by the daemon that the client has not taken yet (beyond the pipe)."""
        self.peak_buffered = 0
        self._behind = False
        self._relief_pending = False
        self._closed = False
        self._loop_thread: int | None = None
        self._reader = threading.Thread(target=self._read_loop, name="heddle-stdin", daemon=True)
        self._writer = threading.Thread(target=self._write_loop, name="heddle-stdout", daemon=True)

    def start(self) -> None:
        """Start reading and writing (called on the event loop's thread)."""
        self._loop_thread = threading.get_ident()
        self._reader.start()
        self._writer.start()

    # -- writing ------------------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        """Queue one framed message; the writer thread sends it (any thread may call this)."""
        if self._closed:
            return
        with self._lock:
            self.buffered += len(data)
            if self.buffered > self.peak_buffered:
                self.peak_buffered = self.buffered
            behind = self.buffered > HIGH_WATER and not self._behind
            if behind:
                self._behind = True
        self._out.put(data)
        if behind:
            if threading.get_ident() == self._loop_thread:
                self.pressure.set(True)  # at once: the emitter writing now must see it
            else:
                self._call_soon(self.pressure.set, True)

    def _write_loop(self) -> None:
        while True:
            data = self._out.get()
            if data is None:
                return
            parts, size, last = [data], len(data), False
            while size < MAX_WRITE and not self._out.empty():  # batch what is ready
                more = self._out.get_nowait()
                if more is None:
                    last = True
                    break
                parts.append(more)
                size += len(more)
            try:
                self._stdout.write(parts[0] if len(parts) == 1 else b"".join(parts))
                self._stdout.flush()
            except (BrokenPipeError, OSError, ValueError) as exc:
                self._broken(exc)
                return
            with self._lock:
                self.buffered -= size
                relieve = (self._behind and self.buffered <= LOW_WATER
                           and not self._relief_pending)
                if relieve:
                    self._relief_pending = True
            if relieve:
                self._call_soon(self._relieve, None)
            if last:
                return

    def _relieve(self, _: object) -> None:
        """On the loop: the client caught up (unless it fell behind again meanwhile)."""
        with self._lock:
            self._relief_pending = False
            caught_up = self._behind and self.buffered <= LOW_WATER
            if caught_up:
                self._behind = False
        if caught_up:
            self.pressure.set(False)

    def _broken(self, exc: BaseException) -> None:
        log.warning("client's stdout is gone: %s", exc)
        self._closed = True
        with self._lock:
            self.buffered = 0
            self._behind = False
        self._call_soon(self.pressure.set, False)
        self._call_soon(self._on_close, "stdout closed")

    def close(self, timeout: float = 2.0) -> None:
        """Write what is queued (for at most `timeout` seconds), then stop writing."""
        if self._closed:
            return
        self._closed = True
        self._out.put(None)
        if self._writer.is_alive():
            self._writer.join(timeout)
        if self._writer.is_alive():
            log.warning("stopped with %d bytes the client did not read", self.buffered)
        with self._lock:
            self.buffered = 0
            self._behind = False
        self.pressure.set(False)

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
