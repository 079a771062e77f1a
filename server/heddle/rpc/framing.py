"""Reading messages from stdin, whatever the bytes.

`Frames` turns the byte stream into decoded messages and `BadInput` items (which the protocol
answers with an error), and never raises on what the client sent. The frames are read by the
shared reader in `heddle.frames` (its docstring says what it accepts); this module decodes
their JSON, refuses what is nested too deep, and rate-limits the warnings about bad input.
"""

from __future__ import annotations

import logging
import os
import re
import time
from typing import Any, Callable, Iterator

import msgspec

from heddle_protocol import ErrorCode
from heddle.frames import MAX_BODY, MAX_HEADER_LINE, Decoder, Refused

__all__ = ["MAX_BODY", "MAX_HEADER_LINE", "MAX_DEPTH", "BadInput", "Complaints", "FdReader",
           "Frames", "decode_message", "valid_id"]

log = logging.getLogger(__name__)

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects in a message; far beyond any real one, and far below
what the rest of the daemon (pygls, msgspec, repr) can walk without running out of stack."""
COMPLAINT_INTERVAL = 10.0
"""Seconds between warnings about bad input; what comes in between is counted and summarised."""


def valid_id(msg_id: object) -> bool:
    """JSON-RPC ids are strings, numbers or null (absent: a notification)."""
    return msg_id is None or isinstance(msg_id, (str, int, float)) and not isinstance(msg_id, bool)


_HIGH_SURROGATE = re.compile(rb"(?<!\\)(?:\\\\)*(\\u[dD][89abAB][0-9a-fA-F]{2})")
"""A `\\uD800`-`\\uDBFF` escape (after an even number of backslashes: not itself escaped)."""
_LOW_SURROGATE = re.compile(rb"\\u[dD][c-fC-F][0-9a-fA-F]{2}")


def _lone_surrogate(body: bytes) -> str | None:
    """Why `body` is malformed if a high surrogate escape is not followed by a low one: msgspec
    reports that as "Input data was truncated", which it is not."""
    for found in _HIGH_SURROGATE.finditer(body):
        after = found.end(1)
        if after < len(body) and not _LOW_SURROGATE.match(body, after):
            return (f"JSON is malformed: invalid \\u escape {found[1].decode()}, a lone UTF-16 "
                    f"surrogate (not followed by a low surrogate \\udc00-\\udfff) "
                    f"(byte {found.start(1)})")
    return None


class BadInput(msgspec.Struct, frozen=True):
    """Stands in for input that is not a message: answered with error `code` and `message`."""

    code: int
    message: str
    id: Any = None

    def reply(self) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": self.id,
                "error": {"code": self.code, "message": self.message}}


def _too_deep(message: Any) -> bool:
    stack = [(message, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        children = value.values() if isinstance(value, dict) else value
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def decode_message(body: bytes, decode: Callable[[bytes], Any]) -> Any:
    """The JSON value of one message's bytes, or the `BadInput` that answers them: what is not
    JSON (invalid UTF-8 included) is a parse error; arrays and objects nested deeper than
    MAX_DEPTH are an invalid request (with the message's id when it has a valid one). Never
    raises on what the client sent (both doors decode with this)."""
    try:
        message = decode(body)
    except RecursionError:
        return BadInput(int(ErrorCode.INVALID_REQUEST), _DEPTH_REASON)
    except (msgspec.DecodeError, ValueError) as exc:  # invalid UTF-8 is a ValueError
        return BadInput(int(ErrorCode.PARSE_ERROR), f"parse error: {_lone_surrogate(body) or exc}")
    if (len(body) > 4096 or body.count(b"[") + body.count(b"{") > MAX_DEPTH) \
            and _too_deep(message):  # counting is cheaper for short bodies, walking for long
        msg_id = message.get("id") if isinstance(message, dict) else None
        return BadInput(int(ErrorCode.INVALID_REQUEST), _DEPTH_REASON,
                        msg_id if valid_id(msg_id) else None)
    return message


_DEPTH_REASON = f"invalid request: arrays and objects nested more than {MAX_DEPTH} levels deep"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


class Complaints:
    """Warnings about bad input: the first, then at most one per COMPLAINT_INTERVAL, with a
    count of what was skipped or refused since the last one."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._next = float("-inf")
        self._bytes = self._lines = self._refused = 0

    def skipped(self, data: bytes) -> None:
        if self._due():
            log.warning("skipping input that is not a message: %r", data[:80])
        else:
            self._bytes += len(data)
            self._lines += data.endswith(b"\n")

    def refused(self, why: str) -> None:
        if self._due():
            log.warning("refusing input: %s", why)
        else:
            self._refused += 1

    def _due(self) -> bool:
        now = self._clock()
        if now < self._next:
            return False
        self.flush()
        self._next = now + COMPLAINT_INTERVAL
        return True

    def flush(self) -> None:
        said = []
        if self._bytes:
            said.append(f"skipped {self._bytes} bytes ({_count(self._lines, 'line')}) that were "
                        "not messages")
        if self._refused:
            said.append(f"refused {_count(self._refused, 'message')}")
        if said:
            log.warning("since the last warning: %s", ", ".join(said))
            self._bytes = self._lines = self._refused = 0


class FdReader:
    """Reads straight from a file descriptor.

    Unlike sys.stdin.buffer it holds no lock, so a thread blocked in it cannot stall
    interpreter shutdown.
    """

    def __init__(self, fd: int):
        self._fd = fd

    def read(self) -> bytes:
        """What has arrived (waiting for something); b"" at the end of input."""
        return os.read(self._fd, 1 << 16)

    def fileno(self) -> int:
        return self._fd


class Frames:
    """The messages on a byte stream: decoded JSON values and `BadInput`s, in order."""

    def __init__(self, source: FdReader, clock: Callable[[], float] = time.monotonic):
        self._source = source
        self.complaints = Complaints(clock)
        self._decode = msgspec.json.Decoder().decode

    def __iter__(self) -> Iterator[object]:
        frames = Decoder(self.complaints)
        while not frames.finished:
            for item in frames.feed(self._source.read()):
                if isinstance(item, Refused):  # the complaints have it already
                    yield BadInput(int(ErrorCode.PARSE_ERROR), item.reason)
                else:
                    yield self._decoded(item)
        self.complaints.flush()

    def _decoded(self, body: bytes) -> object:
        item = decode_message(body, self._decode)
        if isinstance(item, BadInput):
            self.complaints.refused(item.message)
        return item
