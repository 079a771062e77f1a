"""Stdio for the daemon: a reader thread and a writer thread around the event loop.

The reader (`framing.Frames`) turns whatever bytes arrive into messages and `BadInput`s
and hands each to the loop, in order; it never dies of what the client sent, and if it fails
anyway the transport reports the input closed, so the daemon stops instead of going deaf (the
writer does the same for stdout).

`write` queues a framed message (`heddle.frames.encode`) and returns; the writer thread writes what is queued, batched,
so a client that reads slowly never blocks the loop, and the loop never waits in a write
(a write to a pipe the editor waits on often hands the CPU to the editor for a while; that
pause lands on the writer thread). The transport counts the bytes queued and not yet written:
above HIGH_WATER it reports back-pressure through `Pressure`, and the turn emitters keep
their events (text merged) until the count is under LOW_WATER again. Responses, requests and
anything else written directly are always queued at once and in order: nothing is dropped and
nothing overtakes.

A client that sends requests and does not read the answers gets back-pressure on its stdin:
while more than READ_PAUSE bytes wait for it (or MAX_BACKLOG messages that were read wait to
be handled), the reader stops reading, so the pipe fills and the client's writes wait, until
the queue is under READ_RESUME. The pause falls between messages, never inside one. A paused
reader still watches stdin for its other end closing (`hung_up`, every HANGUP_POLL seconds):
a client that went away while it was not reading stops the daemon as stdin closing does.
`must_pause` and `may_resume` are the rule; the ACP door's transport applies it too.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import select
import threading
from typing import BinaryIO, Callable

from heddle.rpc.framing import FdReader, Frames

log = logging.getLogger(__name__)

HIGH_WATER = 128 * 1024
"""Queued bytes above which the client counts as behind (the pipe itself holds 64 KiB)."""
LOW_WATER = 32 * 1024
"""Queued bytes under which it has caught up again."""
MAX_WRITE = 256 * 1024
"""Bytes the writer thread hands to one write() when queued messages are written together."""
READ_PAUSE = 1024 * 1024
"""Queued bytes above which stdin is not read: far above what turns queue (their emitters
hold events once HIGH_WATER is passed), so only answers the client leaves unread get here."""
READ_RESUME = 512 * 1024
MAX_BACKLOG = 1000
"""Messages read but not handled yet (kept during start-up, or behind a busy loop) above
which stdin is not read; reading resumes under half of it."""
HANGUP_POLL = 0.2
"""Seconds between two looks, while stdin is not read, at whether its other end closed."""
_HANGUP = select.POLLHUP | select.POLLERR | select.POLLNVAL | getattr(select, "POLLRDHUP", 0)


def must_pause(buffered: int, backlog: int) -> bool:
    """Whether to stop reading stdin: `buffered` bytes wait for the client to read them, or
    `backlog` messages that were read wait to be handled."""
    return buffered > READ_PAUSE or backlog > MAX_BACKLOG


def may_resume(buffered: int, backlog: int, stalled: bool) -> bool:
    """Whether a paused reader may read again; `stalled`: it paused for the bytes (then they
    must fall under READ_RESUME), not only for the backlog."""
    return buffered <= (READ_RESUME if stalled else READ_PAUSE) and backlog <= MAX_BACKLOG // 2


def hung_up(fd: int) -> bool:
    """Whether the other end of `fd` (a pipe, a socket) has closed, seen without reading from
    it: data the client wrote before it may still wait there. Never true of a regular file."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | _HANGUP)
    try:
        return any(events & _HANGUP for _, events in poller.poll(0))
    except OSError:
        return True


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
        log.debug("the client is %s", "behind on stdout" if backed_up else "reading again")
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


class StdioTransport:
    def __init__(self, stdin: FdReader, stdout: BinaryIO, loop: asyncio.AbstractEventLoop,
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
        self._room = threading.Condition(self._lock)
        """Signalled when the reader, paused (`_paused`), may have room to read again."""
        self._paused = False
        self._resume_at = READ_PAUSE
        """While paused: the queued bytes under which reading resumes."""
        self._read = 0
        """Messages the reader delivered (reader thread only)."""
        self._handled = 0
        """...and those the loop handled (loop thread only)."""
        self._kept = 0
        """Delivered messages that wait elsewhere to be handled (`hold`; loop thread only)."""
        self.pauses = 0
        """How often the reader stopped reading for a client that did not read."""
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
                log.warning("client's stdout is gone: %s", exc)
                self._broken("stdout closed")
                return
            except Exception as exc:  # a bug: stop cleanly rather than answer nothing
                log.error("writing stdout failed: %s", exc)
                log.info("writing stdout failed", exc_info=True)  # the traceback: log file only
                self._broken("writing stdout failed")
                return
            with self._lock:
                self.buffered -= size
                if self._paused and self.buffered <= self._resume_at:
                    self._room.notify()
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

    def _broken(self, why: str) -> None:
        self._closed = True
        with self._lock:
            self.buffered = 0
            self._behind = False
            self._room.notify()
        self._call_soon(self.pressure.set, False)
        self._call_soon(self._on_close, why)

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
            self._room.notify()
        self.pressure.set(False)

    # -- reading ------------------------------------------------------------------------------
    def hold(self, n: int) -> None:
        """`n` more (or, negative, fewer) delivered messages wait to be handled (loop thread)."""
        self._kept += n
        if n < 0 and self._paused and self.backlog <= MAX_BACKLOG // 2:
            with self._lock:
                self._room.notify()

    def _dispatch(self, item: object) -> None:
        """On the loop: one message to the handler; its failure never stops the others."""
        try:
            self._on_message(item)
        except Exception as exc:
            log.error("handling a message failed: %s", exc)
            log.info("handling a message failed", exc_info=True)  # the traceback: log file only
        self._handled += 1
        if self._paused and self.backlog <= MAX_BACKLOG // 2:
            with self._lock:
                self._room.notify()

    def _call_soon(self, callback: Callable[..., None], arg: object) -> None:
        try:
            self._loop.call_soon_threadsafe(callback, arg)
        except RuntimeError:  # the loop is closed: the daemon is exiting
            pass

    def _read_loop(self) -> None:
        why = "stdin closed"
        try:
            for item in Frames(self._stdin):
                self._read += 1
                self._call_soon(self._dispatch, item)
                if not self._wait_for_room():
                    if self._closed:
                        return
                    why = "stdin closed while it was not read"
                    break
        except OSError as exc:
            why = "reading stdin failed"
            log.error("reading stdin failed: %s", exc)
        except Exception as exc:  # a bug, or no memory: stop cleanly rather than go deaf
            why = "reading stdin failed"
            log.error("reading stdin failed: %s", exc or type(exc).__name__)
            log.info("reading stdin failed", exc_info=True)  # the traceback: log file only
        self._call_soon(self._on_close, why)

    @property
    def backlog(self) -> int:
        """Messages read and not handled yet."""
        return self._read - self._handled + self._kept

    @property
    def paused(self) -> bool:
        """Whether the reader waits for room before it reads the next message."""
        return self._paused

    def _wait_for_room(self) -> bool:
        """Before the next message: wait while the client leaves too much unread, or the loop
        is far behind. False once the transport is closed, or stdin's other end closed
        meanwhile."""
        if not must_pause(self.buffered, self.backlog):
            return not self._closed
        fd = self._stdin.fileno()
        gone = False
        with self._lock:
            self._paused = True
            stalled = False
            while not self._closed:
                if not stalled and self.buffered > READ_PAUSE:
                    stalled, self._resume_at = True, READ_RESUME
                    self.pauses += 1
                    log.info("the client reads nothing: %d bytes wait for it; stdin is not "
                             "read until it has read half of them", self.buffered)
                if self._room_to_read(stalled):
                    break
                self._room.wait(HANGUP_POLL)
                if not self._room_to_read(stalled) and hung_up(fd):
                    log.warning("stdin closed while it was not read (%d bytes waited for the "
                                "client, %d messages to be handled)", self.buffered,
                                self.backlog)
                    gone = True
                    break
            self._paused, self._resume_at = False, READ_PAUSE
        if stalled and not gone:
            log.info("reading stdin again; at most %d bytes waited for the client",
                     self.peak_buffered)
        return not (self._closed or gone)

    def _room_to_read(self, stalled: bool) -> bool:
        return may_resume(self.buffered, self.backlog, stalled)
