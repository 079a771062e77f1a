"""Just enough HTTP/1.1 for the scripted model: read a request, write a response.

Keep-alive, Content-Length and chunked request bodies, `Expect: 100-continue`, and chunked
responses for SSE. Every read has a deadline; malformed input raises `HttpError`, which the
server answers with an error status and then closes the connection.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from http import HTTPStatus

__all__ = [
    "ChunkedResponse", "HttpError", "Request", "drain", "read_request", "response_head",
]

MAX_HEAD = 64 * 1024
MAX_BODY = 32 * 1024 * 1024  # the Messages API's own request size limit
WRITE_TIMEOUT = 60.0  # a client that stops reading for this long is dropped


async def drain(writer: asyncio.StreamWriter) -> None:
    """Wait for the send buffer to empty, but never forever (TimeoutError is an OSError)."""
    if writer.transport.get_write_buffer_size() < 64 * 1024:
        await writer.drain()  # below the high-water mark: returns at once, no timer needed
    else:
        await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT)


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    keep_alive: bool


def reason(status: int) -> str:
    if status == 529:
        return "Overloaded"
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def response_head(status: int, headers: list[tuple[str, str]]) -> bytes:
    lines = [f"HTTP/1.1 {status} {reason(status)}"]
    lines.extend(f"{k}: {v}" for k, v in headers)
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def read_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                       idle_timeout: float, body_timeout: float) -> Request | None:
    """Read one request; None when the client closed the connection between requests."""
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), idle_timeout)
    except asyncio.IncompleteReadError as exc:
        if exc.partial.strip():
            raise HttpError(400, "incomplete request head") from exc
        return None
    except asyncio.LimitOverrunError as exc:
        raise HttpError(431, "request head too large") from exc
    except (TimeoutError, ConnectionError):
        return None
    method, path, version, headers = _parse_head(head)
    connection = headers.get("connection", "").lower()
    keep_alive = "close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection
    if headers.get("expect", "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    try:
        body = await asyncio.wait_for(_read_body(reader, headers), body_timeout)
    except asyncio.IncompleteReadError as exc:
        raise HttpError(400, "request body ended early") from exc
    except TimeoutError as exc:
        raise HttpError(408, "request body timed out") from exc
    return Request(method, path.split("?", 1)[0], headers, body, keep_alive)


def _parse_head(head: bytes) -> tuple[str, str, str, dict[str, str]]:
    text = head.decode("latin-1")
    request_line, *header_lines = text[:-4].split("\r\n")
    parts = request_line.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise HttpError(400, f"bad request line: {request_line[:80]!r}")
    headers: dict[str, str] = {}
    for line in header_lines:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise HttpError(400, f"bad header line: {line[:80]!r}")
        key = name.lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return parts[0], parts[1], parts[2], headers


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return await _read_chunked(reader)
    raw = headers.get("content-length", "0")
    if not raw.isdigit():
        raise HttpError(400, "bad content-length")
    length = int(raw)
    if length > MAX_BODY:
        raise HttpError(413, "Request exceeds the maximum allowed number of bytes.")
    return await reader.readexactly(length) if length else b""


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        size_line = await reader.readuntil(b"\r\n")
        try:
            size = int(size_line.split(b";", 1)[0].strip(), 16)
        except ValueError as exc:
            raise HttpError(400, "bad chunk size") from exc
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                pass  # trailers
            return b"".join(parts)
        total += size
        if total > MAX_BODY:
            raise HttpError(413, "Request exceeds the maximum allowed number of bytes.")
        parts.append(await reader.readexactly(size))
        if await reader.readexactly(2) != b"\r\n":
            raise HttpError(400, "bad chunk terminator")


class ChunkedResponse:
    """A chunked response body; one `send` is one chunk (one SSE event)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def start(self, status: int, headers: list[tuple[str, str]]) -> None:
        self._writer.write(response_head(status, [*headers, ("transfer-encoding", "chunked")]))
        await drain(self._writer)

    async def send(self, data: bytes) -> None:
        self._writer.write(b"%x\r\n%b\r\n" % (len(data), data))
        await drain(self._writer)

    async def end(self) -> None:
        self._writer.write(b"0\r\n\r\n")
        await drain(self._writer)
