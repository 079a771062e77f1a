"""A tiny HTTP/1.1 server that answers with exactly the bytes a test scripts.

The scripted model server sends well-formed SSE, one event per chunk. These tests need what it
never sends: CRLF or CR line endings, events split anywhere between reads, multi-line `data:`,
comments, unknown event types, many events in one write, and bodies that stop short. Each
response is a list of steps: `Write(*pieces)` sends the pieces as HTTP chunks in one socket
write; `Wait(event)` holds the response until the test sets the event.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import msgspec


@dataclass
class Write:
    pieces: tuple[bytes, ...]

    def __init__(self, *pieces: bytes) -> None:
        self.pieces = pieces


@dataclass
class Wait:
    event: asyncio.Event


@dataclass
class Reply:
    steps: list[Write | Wait]
    chunked: bool = True
    """False: no Transfer-Encoding, the body ends when the server closes the connection."""
    pause: float = 0.0
    """Seconds between writes, so that each write tends to arrive in a read of its own."""


@dataclass
class RawServer:
    replies: list[Reply]
    bodies: list[Any] = field(default_factory=list)
    url: str = ""
    _server: asyncio.AbstractServer | None = None

    async def __aenter__(self) -> RawServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while self.replies:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    return
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                self.bodies.append(msgspec.json.decode(await reader.readexactly(length)))
                reply = self.replies.pop(0)
                if not await self._send(reply, writer):
                    return
        finally:
            writer.close()

    async def _send(self, reply: Reply, writer: asyncio.StreamWriter) -> bool:
        framing = b"transfer-encoding: chunked\r\n" if reply.chunked else b"connection: close\r\n"
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n" + framing
                     + b"\r\n")
        for step in reply.steps:
            if isinstance(step, Wait):
                await writer.drain()
                await asyncio.wait_for(step.event.wait(), 10)
                continue
            if reply.chunked:
                writer.write(b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in step.pieces if p))
            else:
                writer.write(b"".join(step.pieces))
            await writer.drain()
            if reply.pause:
                await asyncio.sleep(reply.pause)
        if not reply.chunked:
            return False
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


def sse(name: str, data: Any, nl: bytes = b"\n") -> bytes:
    """One event in the usual shape, with the given line ending."""
    return b"event: " + name.encode() + nl + b"data: " + msgspec.json.encode(data) + nl + nl


def message_start(input_tokens: int = 7) -> dict[str, Any]:
    return {"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": 0,
                  "cache_creation_input_tokens": 2, "cache_read_input_tokens": 3}}}


def block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def delta(index: int, d: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": d}


def text_delta(index: int, text: str) -> dict[str, Any]:
    return delta(index, {"type": "text_delta", "text": text})


def block_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def message_end(stop_reason: str = "end_turn", output_tokens: int = 11) -> list[dict[str, Any]]:
    return [{"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
             "usage": {"output_tokens": output_tokens}},
            {"type": "message_stop"}]


def text_answer(*pieces: str) -> list[dict[str, Any]]:
    """The events of a one-block text answer, one delta per piece."""
    return [message_start(), block_start(0, {"type": "text", "text": ""}),
            *(text_delta(0, p) for p in pieces), block_stop(0), *message_end()]


def events_bytes(events: list[dict[str, Any]], nl: bytes = b"\n") -> bytes:
    return b"".join(sse(e["type"], e, nl) for e in events)
