"""LSP base-protocol frames (`Content-Length: N`, a blank line, N bytes): the one encoder and
the one incremental decoder, for the daemon's stdin and for every client of the daemon.

`encode` frames a body. `Decoder.feed` takes bytes as they arrive and gives back the bodies
they complete, and never raises on what the peer sent: the daemon answers what it cannot read
(a `Refused`) and reads on. `Decoder.messages` is the same reader for a peer that must speak
cleanly (the daemon, to its clients): anything that is not a frame raises `FrameError`.

What the reader accepts:

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

Bounds: header lines are read MAX_HEADER_LINE bytes at a time; a body larger than `max_body`
is refused and dropped as it arrives, never held. The scans for a header inside a body run at
C speed whatever the bytes: a well-formed body costs one search for LF and a look at its first
byte. Imports only the standard library, so every layer and every client may use it.
"""

from __future__ import annotations

import re
from typing import Generator, Iterator, Protocol

MAX_HEADER_LINE = 8192
MAX_BODY = 64 * 1024 * 1024

HEADER = b"content-length"
"""The header that starts a message, in lower case."""
_LF_HEADER = re.compile(rb"\n(?i:content-length)")
_BLANK_LINES = re.compile(rb"(?:\r?\n)+")
_TOKEN = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_WHITESPACE = b" \t\r\n"
_MORE = object()
"""Yielded inside the reader when it needs more bytes than `feed` gave it."""


def encode(body: bytes) -> bytes:
    """The frame of one message body."""
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


class FrameError(Exception):
    """A peer that must speak cleanly sent something that is not a frame."""


class Refused:
    """A frame the reader could not take (it is answered with a parse error)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str):
        self.reason = reason

    def __repr__(self) -> str:
        return f"Refused({self.reason!r})"


class Notes(Protocol):
    """Where the reader reports what it skipped or refused (the daemon rate-limits these)."""

    def skipped(self, data: bytes) -> None: ...

    def refused(self, why: str) -> None: ...


class _Strict:
    """Notes that keep the first problem, for `Decoder.messages`."""

    def __init__(self) -> None:
        self.problem: str | None = None

    def skipped(self, data: bytes) -> None:
        self.problem = self.problem or f"bytes that are not a message: {data[:80]!r}"

    def refused(self, why: str) -> None:
        self.problem = self.problem or why


class Decoder:
    """Frames from a byte stream fed in pieces of any size. Without `notes`, what is skipped
    or refused is kept for `messages` to raise."""

    def __init__(self, notes: Notes | None = None, max_body: int = MAX_BODY):
        self._buffer = _Buffer()
        self._strict = _Strict() if notes is None else None
        self._reader = _frames(self._buffer, notes or self._strict, max_body)
        self.finished = False
        """The input ended (`feed(b"")`) and everything before it was read."""

    def feed(self, data: bytes) -> Iterator[bytes | Refused]:
        """The bodies (and refusals) that `data` completes, in order; b"" ends the input.
        Take them all before feeding again."""
        if data:
            self._buffer.data += data
        else:
            self._buffer.eof = True
        return self._drain()

    def messages(self, data: bytes) -> Iterator[bytes]:
        """The bodies that `data` completes; FrameError at the first thing that is not a
        frame, after the bodies before it (b"" ends the input, and raises if it ended inside a
        message). Take them all before feeding again."""
        strict = self._strict
        for item in self.feed(data):
            if strict is not None and strict.problem is not None:
                raise FrameError(strict.problem)
            if isinstance(item, Refused):
                raise FrameError(item.reason)
            yield item
        if strict is not None and strict.problem is not None:
            raise FrameError(strict.problem)

    @property
    def buffered(self) -> int:
        """Bytes fed and not read yet (at most a header line, or what a body has so far)."""
        return len(self._buffer.data)

    def _drain(self) -> Iterator[bytes | Refused]:
        if self.finished:
            return
        for item in self._reader:
            if item is _MORE:
                return
            yield item  # type: ignore[misc]
        self.finished = True


Read = Generator[object, None, "bytes"]


class _Buffer:
    """The bytes fed and not read yet, with the scans the reader needs. Each read is a
    generator that yields `_MORE` when it must wait for `feed` (and then sees what came)."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.eof = False

    def _fill(self) -> Generator[object, None, bool]:
        """Wait for more bytes: False once the input has ended."""
        if self.eof:
            return False
        size = len(self.data)
        while len(self.data) == size and not self.eof:
            yield _MORE
        return len(self.data) > size

    def line_now(self, limit: int) -> bytes | None:
        """`readline` when the line is here already (the usual case, without a generator)."""
        end = self.data.find(b"\n", 0, limit)
        return self._take(end + 1) if end >= 0 else None

    def body_now(self, n: int) -> bytes | None:
        """`read_body` when the body is here, one line, not a header (the usual case)."""
        buf = self.data
        if len(buf) >= n > 0 and buf[0] not in b"Cc" and buf.find(b"\n", 0, n) < 0:
            body = bytes(buf[:n])
            del buf[:n]
            return body
        return None

    def readline(self, limit: int) -> Read:
        """The next line with its LF; at most `limit` bytes (then without LF); b"" at the end."""
        while True:
            end = self.data.find(b"\n", 0, limit)
            if end >= 0:
                return self._take(end + 1)
            if len(self.data) >= limit or not (yield from self._fill()):
                return self._take(min(limit, len(self.data)))

    def read_body(self, n: int) -> Generator[object, None, tuple[bytes, bool]]:
        """Read a body of `n` bytes, stopping early before a line in it that starts with
        `Content-Length` (or with the start of that word, where the body ends).

        Returns the body and whether it was cut short that way; shorter and not cut: the
        input ended.
        """
        parts: list[bytes] = []
        got = 0
        line_start = True  # is the first byte in the buffer at the start of a line?
        while True:
            buf = self.data
            end = min(len(buf), n - got)
            stop, cut = _header_line(buf, end, end == n - got, line_start)
            if stop:
                line_start = buf[stop - 1] == 10
                parts.append(bytes(buf[:stop]))
                del buf[:stop]
                got += stop
            if cut or got == n or not (yield from self._fill()):
                return b"".join(parts), cut

    def discard(self, n: int) -> Generator[object, None, tuple[int, bool]]:
        """Drop a body of `n` bytes (any size) that is not wanted, stopping early before
        `Content-Length` wherever it appears in it: the body is refused anyway, and a client
        that declared more than it sent gets its next message read.

        Returns how many bytes were dropped and whether it stopped early; fewer than `n` and
        not early: the input ended.
        """
        got, keep = 0, len(HEADER) - 1
        while True:
            buf = self.data
            end = min(len(buf), n - got)
            low = bytes(buf[:end]).lower()
            at = low.find(HEADER)
            if at < 0 and end == n - got:  # the word may begin at the very end of the body
                at = next((end - k for k in range(min(keep, end), 0, -1)
                           if HEADER.startswith(low[end - k:])), -1)
            if at >= 0:
                del buf[:at]
                return got + at, True
            drop = end if end == n - got else max(0, end - keep)  # keep what may begin it
            del buf[:drop]
            got += drop
            if got == n or not (yield from self._fill()):
                return got, False

    def skip_blank_lines(self) -> None:
        """Drop the empty lines at the front of what is buffered, all at once."""
        blank = _BLANK_LINES.match(self.data)
        if blank:
            del self.data[:blank.end()]

    def _take(self, n: int) -> bytes:
        out = bytes(self.data[:n])
        del self.data[:n]
        return out


def _header_line(buf: bytearray, end: int, body_ends: bool, line_start: bool) -> tuple[int, bool]:
    """Where a line that starts with `Content-Length` begins in the body bytes buf[:end]:
    (its index, True); or (how much of buf can be taken as body, False). `body_ends`: buf[:end]
    ends the body; `line_start`: buf[0] starts a line."""
    if line_start and end:
        k = min(len(HEADER), end)
        if bytes(buf[:k]).lower() == HEADER[:k]:
            return (0, True) if k == len(HEADER) or body_ends else (0, False)
    if buf.find(b"\n", 0, end) < 0:  # one line: the usual case (the regex is 40x slower)
        return end, False
    found = _LF_HEADER.search(buf, 0, end)
    if found:
        return found.start() + 1, True
    lf = buf.rfind(b"\n", max(0, end - len(HEADER)), end)  # the word may begin at the end
    if lf >= 0 and lf + 1 < end and HEADER.startswith(bytes(buf[lf + 1:end]).lower()):
        return lf + 1, body_ends  # cut where the body ends; else read on to tell
    return end, False


def _header(line: bytes) -> tuple[bytes, bytes] | None:
    """(lower-case name, value) of a header line, or None if it is not one."""
    name, sep, value = line.partition(b":")
    if not sep:
        return None
    name = name.lower()
    if name != HEADER:
        name = name.rstrip(b" \t")
        if not _TOKEN.fullmatch(name):
            return None
    return name, value.strip(_WHITESPACE)


def _resync(line: bytes) -> bytes | None:
    """The value of a `Content-Length` header that ends this line that is not a header."""
    at = line.lower().rfind(HEADER)
    if at < 0:
        return None
    header = _header(line[at:])
    return header[1] if header is not None and header[0] == HEADER else None


def _frames(source: _Buffer, notes: Notes, max_body: int) -> Generator[object, None, None]:
    """The reader: bodies, `Refused`s and `_MORE`, until the input ends."""
    in_block = False  # header lines of a message have been read
    length: bytes | None = None  # its Content-Length value, as sent
    skipping = False  # after a block without a usable length: skip to a Content-Length
    continued = False  # this line goes on past MAX_HEADER_LINE (read in pieces)
    tail = b""  # the end of the previous piece of such a line
    while True:
        line = source.line_now(MAX_HEADER_LINE)
        if line is None:
            line = yield from source.readline(MAX_HEADER_LINE)
        if not line:
            return
        partial, continued = continued, len(line) == MAX_HEADER_LINE and line[-1] != 10
        if (line == b"\r\n" or line == b"\n") and not partial:
            if not in_block:
                source.skip_blank_lines()
                continue
            in_block = False
            if length is not None and length.isdigit() and len(length) < 9 \
                    and (size := int(length)) <= max_body:
                body, cut = source.body_now(size), False
                if body is None:
                    body, cut = yield from source.read_body(size)
                if not cut and len(body) == size:
                    length, skipping = None, False
                    yield body
                    continue
                outcome = yield from _short(notes, body, size, cut)
            else:
                outcome = yield from _unusable(source, notes, length, max_body)
            length, skipping = None, outcome == "skip"
            if outcome == "eof":
                return
            continue
        header = None if partial or continued else _header(line)
        if header is not None and (header[0] != HEADER or not header[1].isdigit()):
            later = _resync(line[1:])  # an unframed body ran into a header on this line
            if later is not None:
                header = (HEADER, later)
        if header is not None and (header[0] == HEADER or not skipping):
            in_block = True
            if header[0] == HEADER:
                length, skipping = header[1], False
            continue
        notes.skipped(line)
        value = _resync(tail + line if partial else line)
        tail = line[-64:] if continued else b""
        if value is not None:
            in_block, length, skipping = True, value, False


def _refuse(notes: Notes, why: str) -> Refused:
    notes.refused(why)
    return Refused(why)


def _unusable(source: _Buffer, notes: Notes, length: bytes | None, max_body: int):
    """A header block without a length this reader takes: yields the refusal, returns
    whether to go on ("ok"), skip to the next Content-Length ("skip"), or stop ("eof")."""
    if length is None:
        yield _refuse(notes, "a message without a Content-Length header")
        return "skip"
    if not length.isdigit():
        yield _refuse(notes, f"invalid Content-Length {length[:40]!r}")
        return "skip"
    digits = length.lstrip(b"0") or b"0"
    size = int(digits) if len(digits) <= 20 else 10 ** 20
    yield _refuse(notes, f"a message of {size} bytes is larger than the limit ({max_body})")
    got, cut = yield from source.discard(size)  # after the answer: this may take long
    return "ok" if cut or got == size else "eof"


def _short(notes: Notes, body: bytes, size: int, cut: bool):
    """A body that ended before its length: cut by a new header, or by the end of input."""
    if cut:
        yield _refuse(notes, f"the message ended after {len(body)} of its {size} bytes: a "
                      "Content-Length header began a new one")
        return "ok"
    notes.refused(f"the input ended inside a message ({len(body)} of {size} bytes)")
    return "eof"
