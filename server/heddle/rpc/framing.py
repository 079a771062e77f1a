"""Reading LSP base-protocol frames from stdin, whatever the bytes.

`Frames` turns a byte stream into decoded messages and `BadInput` items (which the protocol
answers with an error), and never raises on what the client sent. What it accepts:

- A message is a block of header lines, a blank line, and a body of exactly `Content-Length`
  bytes. Lines end with LF (CRLF or a bare LF; a lone CR does not end a line). Header names
  are case-insensitive and other headers are ignored; when a block has several
  `Content-Length`s the last one counts.
- A line that is not a header is skipped. A `Content-Length` header later on such a line (an
  unframed body run into the next header) starts a new message there.
- A line that starts with `Content-Length` always starts a new message, even inside a body
  whose declared length has not been read yet: valid JSON has no line that starts with `C`,
  so this only ever cuts a body that is truncated (the client said more bytes than it sent),
  and the next message is read intact. This is what re-synchronises after any bad input.

The byte-level reads, and the search of a body for such a line, are in `fdreader`.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any, Callable, Iterator

import msgspec

from heddle_protocol import ErrorCode
from heddle.rpc.fdreader import HEADER as _MARK, FdReader

log = logging.getLogger(__name__)

MAX_HEADER_LINE = 8192
MAX_BODY = 64 * 1024 * 1024
MAX_DEPTH = 64
"""Deepest nesting of arrays and objects in a message; far beyond any real one, and far below
what the rest of the daemon (pygls, msgspec, repr) can walk without running out of stack."""
COMPLAINT_INTERVAL = 10.0
"""Seconds between warnings about bad input; what comes in between is counted and summarised."""

_TOKEN = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_WHITESPACE = b" \t\r\n"


def valid_id(msg_id: object) -> bool:
    """JSON-RPC ids are strings, numbers or null (absent: a notification)."""
    return msg_id is None or isinstance(msg_id, (str, int, float)) and not isinstance(msg_id, bool)


class BadInput(msgspec.Struct, frozen=True):
    """Stands in for input that is not a message: answered with error `code` and `message`."""

    code: int
    message: str
    id: Any = None

    def reply(self) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": self.id,
                "error": {"code": self.code, "message": self.message}}


def _header(line: bytes) -> tuple[bytes, bytes] | None:
    """(lower-case name, value) of a header line, or None if it is not one."""
    name, sep, value = line.partition(b":")
    if not sep:
        return None
    name = name.lower()
    if name != _MARK:
        name = name.rstrip(b" \t")
        if not _TOKEN.fullmatch(name):
            return None
    return name, value.strip(_WHITESPACE)


def _resync(line: bytes) -> bytes | None:
    """The value of a `Content-Length` header that ends this line that is not a header."""
    at = line.lower().rfind(_MARK)
    if at < 0:
        return None
    header = _header(line[at:])
    return header[1] if header is not None and header[0] == _MARK else None


def _too_deep(message: Any) -> bool:
    stack = [(message, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        children = value.values() if isinstance(value, dict) else value
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


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


class Frames:
    """The messages on a byte stream: decoded JSON values and `BadInput`s, in order."""

    def __init__(self, source: FdReader, clock: Callable[[], float] = time.monotonic):
        self._source = source
        self.complaints = Complaints(clock)
        self._decode = msgspec.json.Decoder().decode

    def __iter__(self) -> Iterator[object]:
        source, complaints = self._source, self.complaints
        in_block = False  # header lines of a message have been read
        length: bytes | None = None  # its Content-Length value, as sent
        skipping = False  # after a block without a usable length: skip to a Content-Length
        continued = False  # this line goes on past MAX_HEADER_LINE (read in pieces)
        tail = b""  # the end of the previous piece of such a line
        while True:
            line = source.readline(MAX_HEADER_LINE)
            if not line:
                complaints.flush()
                return
            partial, continued = continued, len(line) == MAX_HEADER_LINE and line[-1] != 10
            if (line == b"\r\n" or line == b"\n") and not partial:
                if not in_block:
                    source.skip_blank_lines()
                    continue
                in_block = False
                if length is not None and length.isdigit() and len(length) < 9 \
                        and (size := int(length)) <= MAX_BODY:
                    body, cut = source.read_body(size)
                    if not cut and len(body) == size:
                        length, skipping = None, False
                        yield self._decoded(body)
                        continue
                    outcome = yield from self._short(body, size, cut)
                else:
                    outcome = yield from self._unusable(length)
                length, skipping = None, outcome == "skip"
                if outcome == "eof":
                    complaints.flush()
                    return
                continue
            header = None if partial or continued else _header(line)
            if header is not None and (header[0] != _MARK or not header[1].isdigit()):
                later = _resync(line[1:])  # an unframed body ran into a header on this line
                if later is not None:
                    header = (_MARK, later)
            if header is not None and (header[0] == _MARK or not skipping):
                in_block = True
                if header[0] == _MARK:
                    length, skipping = header[1], False
                continue
            complaints.skipped(line)
            value = _resync(tail + line if partial else line)
            tail = line[-64:] if continued else b""
            if value is not None:
                in_block, length, skipping = True, value, False

    def _unusable(self, length: bytes | None):
        """A header block without a length this reader takes: yields the refusal, returns
        whether to go on ("ok"), skip to the next Content-Length ("skip"), or stop ("eof")."""
        if length is None:
            yield self._refuse(ErrorCode.PARSE_ERROR, "a message without a Content-Length header")
            return "skip"
        if not length.isdigit():
            yield self._refuse(ErrorCode.PARSE_ERROR, f"invalid Content-Length {length[:40]!r}")
            return "skip"
        digits = length.lstrip(b"0") or b"0"
        size = int(digits) if len(digits) <= 20 else 10 ** 20
        yield self._refuse(ErrorCode.PARSE_ERROR,
                           f"a message of {size} bytes is larger than the limit ({MAX_BODY})")
        got, cut = self._source.discard(size)  # after the answer: this may take long
        return "ok" if cut or got == size else "eof"

    def _short(self, body: bytes, size: int, cut: bool):
        """A body that ended before its length: cut by a new header, or by the end of input."""
        if cut:
            yield self._refuse(ErrorCode.PARSE_ERROR, f"the message ended after {len(body)} of "
                               f"its {size} bytes: a Content-Length header began a new one")
            return "ok"
        self.complaints.refused(f"the input ended inside a message ({len(body)} of {size} bytes)")
        return "eof"

    def _decoded(self, body: bytes) -> object:
        try:
            message = self._decode(body)
        except RecursionError:
            return self._refuse(ErrorCode.INVALID_REQUEST, self._depth_reason())
        except (msgspec.DecodeError, ValueError) as exc:  # invalid UTF-8 is a ValueError
            return self._refuse(ErrorCode.PARSE_ERROR, f"parse error: {exc}")
        if (len(body) > 4096 or body.count(b"[") + body.count(b"{") > MAX_DEPTH) \
                and _too_deep(message):  # counting is cheaper for short bodies, walking for long
            msg_id = message.get("id") if isinstance(message, dict) else None
            return self._refuse(ErrorCode.INVALID_REQUEST, self._depth_reason(),
                                msg_id if valid_id(msg_id) else None)
        return message

    @staticmethod
    def _depth_reason() -> str:
        return f"invalid request: arrays and objects nested more than {MAX_DEPTH} levels deep"

    def _refuse(self, code: int, why: str, msg_id: Any = None) -> BadInput:
        self.complaints.refused(why)
        return BadInput(int(code), why, msg_id)
