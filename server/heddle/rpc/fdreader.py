"""Buffered reads from stdin's file descriptor, with the scans the framing needs.

`read_body` and `discard` stop early where a new message begins inside a body (see
`framing`), and find it at C speed whatever the bytes: a well-formed body costs one search for
LF and a look at its first byte.
"""

from __future__ import annotations

import os
import re

HEADER = b"content-length"
"""The header that starts a message, in lower case."""
_LF_HEADER = re.compile(rb"\n(?i:content-length)")
_BLANK_LINES = re.compile(rb"(?:\r?\n)+")


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
        """The next line with its LF; at most `limit` bytes (then without LF); b"" at the end."""
        while True:
            end = self._buf.find(b"\n", 0, limit)
            if end >= 0:
                return self._take(end + 1)
            if len(self._buf) >= limit or not self._fill():
                return self._take(min(limit, len(self._buf)))

    def read_body(self, n: int) -> tuple[bytes, bool]:
        """Read a body of `n` bytes, stopping early before a line in it that starts with
        `Content-Length` (or with the start of that word, where the body ends).

        Returns the body and whether it was cut short that way; shorter and not cut: the
        input ended.
        """
        buf = self._buf
        if len(buf) >= n > 0 and buf[0] not in b"Cc" and buf.find(b"\n", 0, n) < 0:
            body = bytes(buf[:n])  # the usual case: all there, one line, not a header
            del buf[:n]
            return body, False
        parts: list[bytes] = []
        got = 0
        line_start = True  # is the first byte in the buffer at the start of a line?
        while True:
            buf = self._buf
            end = min(len(buf), n - got)
            stop, cut = _header_line(buf, end, end == n - got, line_start)
            if stop:
                line_start = buf[stop - 1] == 10
                parts.append(bytes(buf[:stop]))
                del buf[:stop]
                got += stop
            if cut or got == n or not self._fill():
                return b"".join(parts), cut

    def discard(self, n: int) -> tuple[int, bool]:
        """Drop a body of `n` bytes (any size) that is not wanted, stopping early before
        `Content-Length` wherever it appears in it: the body is refused anyway, and a client
        that declared more than it sent gets its next message read.

        Returns how many bytes were dropped and whether it stopped early; fewer than `n` and
        not early: the input ended.
        """
        got, keep = 0, len(HEADER) - 1
        while True:
            buf = self._buf
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
            if got == n or not self._fill():
                return got, False

    def skip_blank_lines(self) -> None:
        """Drop the empty lines at the front of what is buffered, all at once."""
        blank = _BLANK_LINES.match(self._buf)
        if blank:
            del self._buf[:blank.end()]

    def _take(self, n: int) -> bytes:
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out


def _header_line(buf: bytearray, end: int, body_ends: bool, line_start: bool) -> tuple[int, bool]:
    """Where a line that starts with `Content-Length` begins in the body bytes buf[:end]:
    (its index, True); or (how much of buf can be taken as body, False). `body_ends`: buf[:end]
    ends the body; `line_start`: buf[0] starts a line. Scans at C speed, whatever the bytes."""
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
