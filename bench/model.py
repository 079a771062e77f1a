"""The model side of a benchmark: the scripted server in its own process, and a proxy.

The scripted Messages API server runs in a child process, so the work of streaming thousands
of SSE events never competes with the benchmark's client for one interpreter lock. Between the
daemon and that server sits `StampingProxy`, a TCP relay on the benchmark's own event loop:
it writes down, for every model request, when its first byte left the daemon, when the last
byte of the answer left the server, and (on demand) when each piece of the answer was handed
on to the daemon. It reads from the server as fast as the server writes, whatever the daemon
does, so the server's own time is measured even when the daemon falls behind.
"""

from __future__ import annotations

import asyncio
import bisect
import multiprocessing
import re
import time
from dataclasses import dataclass, field
from typing import Any

_END = b"\r\n0\r\n\r\n"


# -- the scripted server, in a child process ---------------------------------------------------

def _serve(conn) -> None:
    from heddle.scripted import ScriptedServer

    server = ScriptedServer()
    with server.run_in_thread() as srv:
        conn.send(srv.url)
        while True:
            try:
                command, *args = conn.recv()
            except EOFError:
                return
            if command == "add":
                srv.add_scenario(*args)
                conn.send(None)
            elif command == "requests":
                conn.send([{"step": r.step_index, "status": r.status, "at": r.at}
                           for r in srv.requests_for(args[0])])
            elif command == "stop":
                conn.send(None)
                return


class ModelServer:
    """Handle on the scripted server process (blocking calls; they take well under 1 ms)."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child,), name="bench-model", daemon=True)
        self.url = ""

    def start(self) -> str:
        self._proc.start()
        if not self._conn.poll(30):
            raise RuntimeError("the scripted model server did not start")
        self.url = self._conn.recv()
        return self.url

    def add(self, name: str, scenario: dict[str, Any]) -> None:
        self._conn.send(("add", name, scenario))
        self._conn.recv()

    def requests(self, name: str) -> list[dict[str, Any]]:
        self._conn.send(("requests", name))
        return self._conn.recv()

    def stop(self) -> None:
        if self._proc.is_alive():
            try:
                self._conn.send(("stop",))
                self._conn.poll(5) and self._conn.recv()
            except (OSError, EOFError):
                pass
            self._proc.join(5)
            if self._proc.is_alive():
                self._proc.terminate()


# -- the stamping proxy ------------------------------------------------------------------------

@dataclass
class Exchange:
    """One model request and its answer, as seen between the daemon and the server."""

    connection: int
    request_at: float
    """First byte of the request from the daemon."""
    line: bytes = b""
    """The request line (`POST /v1/messages HTTP/1.1`)."""
    request_bytes: int = 0
    first_byte_at: float | None = None
    """First byte of the answer from the server."""
    end_at: float | None = None
    """Last byte of the answer from the server (its own time ends here)."""
    response_bytes: int = 0
    pieces: list[tuple[float, bytes]] = field(default_factory=list)
    """With `record`: (when it was handed to the daemon, bytes) for every piece of the answer."""

    _head: bytes = b""
    _length: int | None = None
    """Content-Length of a plain answer; None while the head is incomplete, -1 when chunked."""
    _tail: bytes = b""

    def feed(self, data: bytes) -> bool:
        """Follow the answer's framing; True once its last byte has arrived."""
        if self._length is None:
            self._head += data
            end = self._head.find(b"\r\n\r\n")
            if end < 0:
                return False
            head, data = self._head[:end].lower(), self._head[end + 4:]
            self._head = b""
            self._length = -1
            if b"transfer-encoding: chunked" not in head:
                match = re.search(rb"content-length:\s*(\d+)", head)
                self._length = int(match.group(1)) if match else 0
            if self._length >= 0:
                self._length -= len(data)
                return self._length <= 0
            self._tail = b"\r\n"  # the body starts at a chunk boundary
        elif self._length >= 0:
            self._length -= len(data)
            return self._length <= 0
        self._tail = (self._tail + data)[-len(_END):]
        return self._tail.endswith(_END)

    @property
    def server_s(self) -> float | None:
        return None if self.end_at is None else self.end_at - self.request_at


class StampingProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self._up = (upstream_host, upstream_port)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task] = set()
        self._connections = 0
        self.exchanges: list[Exchange] = []
        self.record = False
        self._downstream: dict[int, asyncio.StreamWriter] = {}
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=2)

    def reset(self) -> None:
        self.exchanges = []

    def backlog(self) -> int:
        """Bytes the proxy holds for daemons that have not read them yet."""
        return sum(w.transport.get_write_buffer_size() for w in self._downstream.values()
                   if not w.transport.is_closing())

    async def _accept(self, down_r: asyncio.StreamReader, down_w: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection(*self._up)
        except OSError:
            down_w.close()
            return
        task = asyncio.current_task()
        self._tasks.add(task)
        self._connections += 1
        cid = self._connections
        self._downstream[cid] = down_w
        current: list[Exchange | None] = [None]
        # Never let the relay push back on the server: the daemon side buffers without bound.
        down_w.transport.set_write_buffer_limits(high=1 << 30)

        async def requests() -> None:
            while True:
                data = await down_r.read(1 << 16)
                now = time.monotonic()
                if not data:
                    up_w.close()
                    return
                ex = current[0]
                if ex is None or ex.end_at is not None:
                    ex = Exchange(cid, now, line=data.split(b"\r\n", 1)[0][:200])
                    current[0] = ex
                    self.exchanges.append(ex)
                ex.request_bytes += len(data)
                up_w.write(data)

        async def answers() -> None:
            while True:
                data = await up_r.read(1 << 16)
                now = time.monotonic()
                if not data:
                    down_w.close()
                    return
                down_w.write(data)
                ex = current[0]
                if ex is None:
                    continue
                if ex.first_byte_at is None:
                    ex.first_byte_at = now
                ex.response_bytes += len(data)
                if self.record:
                    ex.pieces.append((now, data))
                if ex.end_at is None and ex.feed(data):
                    ex.end_at = now

        try:
            await asyncio.gather(requests(), answers())
        except (ConnectionError, OSError, asyncio.CancelledError):
            pass
        finally:
            self._downstream.pop(cid, None)
            for w in (down_w, up_w):
                w.close()
            self._tasks.discard(task)


# -- reading what the proxy recorded ----------------------------------------------------------

def text_arrivals(ex: Exchange) -> list[tuple[float, int]]:
    """(when it reached the daemon, text characters so far) after each text delta of an answer.

    Parses the recorded answer (HTTP head, chunked body, SSE events); an event is dated by the
    piece that carried the end of the chunk completing it.
    """
    import msgspec

    raw = b"".join(p for _, p in ex.pieces)
    piece_ends, times, offset = [], [], 0
    for t, p in ex.pieces:
        offset += len(p)
        piece_ends.append(offset)
        times.append(t)
    pos = raw.find(b"\r\n\r\n") + 4
    pending = b""
    out: list[tuple[float, int]] = []
    total = 0
    while pos < len(raw):
        line_end = raw.find(b"\r\n", pos)
        if line_end < 0:
            break
        size = int(raw[pos:line_end].split(b";")[0], 16)
        if size == 0:
            break
        start = line_end + 2
        pending += raw[start:start + size]
        pos = start + size + 2
        at = times[min(bisect.bisect_left(piece_ends, start + size), len(times) - 1)]
        *events, pending = pending.split(b"\n\n")
        for event in events:
            for line in event.split(b"\n"):
                if not line.startswith(b"data:"):
                    continue
                ev = msgspec.json.decode(line[5:])
                if (ev.get("type") == "content_block_delta"
                        and ev["delta"].get("type") == "text_delta"):
                    total += len(ev["delta"]["text"])
                    out.append((at, total))
    return out
