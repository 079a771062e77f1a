"""Live output of running commands, as a turn's emitter sends it: decoded, coalesced, bounded.

A command may write 50 MB in a second or a line a minute; the editor should see it as it comes
without the daemon or the editor drowning, and without a permission request or the end of a
call ever waiting behind it. So per call and stream:

- the bytes not sent yet are kept here, at most OUTPUT_EVENT_BYTES of them (the newest): what
  falls out is counted and reported as `elided` with the next event;
- they go out as one `toolOutput` event at most every OUTPUT_INTERVAL, and only while the
  client keeps up: while it is behind they wait here (still bounded), never in the turn's
  queue, so nothing that queue holds (control events) waits behind output;
- once a call has sent OUTPUT_CALL_BYTES live, it sends no more until it ends; then its
  last OUTPUT_EVENT_BYTES per stream go out, the rest counted in `elided`;
- when the call finishes, `finish` hands the emitter the call's last events to queue just
  before its `toolCallFinished`: at most one per stream.

Bytes are decoded with one incremental UTF-8 decoder per stream, so a character split between
reads stays whole; where bytes were left out, the decoder starts afresh at the next character.
"""

from __future__ import annotations

import asyncio
import codecs
import time
from typing import Callable

from heddle_protocol import events as wev
from heddle.core import events as core

OUTPUT_INTERVAL = 0.1
"""Seconds between two `toolOutput` events of one call."""
OUTPUT_EVENT_BYTES = 16 * 1024
"""Most output bytes in one event (per stream): the newest are kept."""
OUTPUT_CALL_BYTES = 256 * 1024
"""Output bytes one call sends live; after that, only its tail when it ends."""

Wrap = Callable[[wev.Ev], wev.Ev]
"""Puts a call's output event where it belongs (under its Task call, for a sub-agent's)."""


def _as_is(event: wev.Ev) -> wev.Ev:
    return event


class _Stream:
    __slots__ = ("pending", "elided", "cut", "decoder")

    def __init__(self) -> None:
        self.pending = bytearray()
        self.elided = 0
        self.cut = False
        """Bytes before `pending` were left out: the decoder's partial character with them."""
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def add(self, data: bytes) -> None:
        if len(data) >= OUTPUT_EVENT_BYTES:  # a big read: its tail is all that can be kept
            self.elided += len(self.pending) + len(data) - OUTPUT_EVENT_BYTES
            self.pending[:] = data[-OUTPUT_EVENT_BYTES:]
        else:
            self.pending += data
            over = len(self.pending) - OUTPUT_EVENT_BYTES
            if over > 0:
                del self.pending[:over]
                self.elided += over
        if self.elided:
            self.cut = True

    def take(self, final: bool) -> tuple[str, int, int]:
        """(text, bytes elided before it, bytes of output it stands for)."""
        data = bytes(self.pending)
        self.pending.clear()
        if self.cut:
            partial = self.decoder.getstate()[0]
            self.decoder.reset()
            skip = 0
            while skip < min(3, len(data)) and data[skip] & 0xC0 == 0x80:
                skip += 1  # the rest of a character whose start was left out
            self.elided += len(partial) + skip
            data = data[skip:]
            self.cut = False
        text = self.decoder.decode(data, final)
        elided, self.elided = self.elided, 0
        return text, elided, len(data)


class _Call:
    __slots__ = ("id", "wrap", "streams", "sent", "last", "timer", "due")

    def __init__(self, call_id: str, wrap: Wrap):
        self.id = call_id
        self.wrap = wrap
        self.streams: dict[tuple[str | None, str], _Stream] = {}
        self.sent = 0
        self.last = float("-inf")
        self.timer: asyncio.Handle | None = None
        self.due = False
        """The timer fired while the client was behind: send once it catches up."""

    @property
    def capped(self) -> bool:
        return self.sent >= OUTPUT_CALL_BYTES

    def events(self, final: bool) -> list[wev.Ev]:
        out = []
        for (hook, stream), s in self.streams.items():
            if not (s.pending or s.elided or (final and s.decoder.getstate()[0])):
                continue
            text, elided, size = s.take(final)
            self.sent += size
            if text or elided:
                out.append(self.wrap(wev.ToolOutputEvent(
                    tool_call_id=self.id, stream=stream, text=text, elided=elided or None,
                    hook=hook)))
        return out


class LiveOutput:
    """The output of a turn's running calls, for its emitter.

    `send` puts an event on the wire at once; `blocked` says whether it must wait (the client
    is behind, or the emitter's queue holds events, which go first); `wake` asks the emitter
    to call `send_due` once it is not blocked any more.
    """

    def __init__(self, send: Callable[[wev.Ev], None], blocked: Callable[[], bool],
                 wake: Callable[[], None]):
        self._send = send
        self._blocked = blocked
        self._wake = wake
        self._calls: dict[str, _Call] = {}
        self._ended: set[str] = set()
        """Calls that finished: output that still comes for them is not shown."""
        self._closed = False

    def add(self, chunk: core.ToolOutputChunk, wrap: Wrap = _as_is) -> None:
        if self._closed or chunk.tool_call_id in self._ended:
            return
        call = self._calls.get(chunk.tool_call_id)
        if call is None:
            call = self._calls[chunk.tool_call_id] = _Call(chunk.tool_call_id, wrap)
        stream = call.streams.get((chunk.hook, chunk.stream))
        if stream is None:
            stream = call.streams[(chunk.hook, chunk.stream)] = _Stream()
        stream.add(chunk.data)
        if call.capped or call.timer is not None or call.due:
            return
        loop = asyncio.get_running_loop()
        wait = call.last + OUTPUT_INTERVAL - time.monotonic()
        if wait <= 0:  # quiet until now: send once the bytes that came together are in
            call.timer = loop.call_soon(self._on_timer, call)
        else:
            call.timer = loop.call_later(wait, self._on_timer, call)

    def finish(self, call_id: str) -> list[wev.Ev]:
        """The call ended: its last output events, to go just before its end."""
        self._ended.add(call_id)
        call = self._calls.pop(call_id, None)
        if call is None:
            return []
        if call.timer is not None:
            call.timer.cancel()
        return call.events(final=True)

    def close(self) -> list[wev.Ev]:
        """The turn ends: the last output of every call (Stop hooks' too); nothing after."""
        events = [e for call_id in list(self._calls) for e in self.finish(call_id)]
        self._closed = True
        return events

    def send_due(self) -> None:
        """Send the output that waited for the client, while it keeps up."""
        for call in list(self._calls.values()):
            if not call.due:
                continue
            if self._blocked():  # behind again: the rest wait for the next relief
                self._wake()
                return
            call.due = False
            self._flush(call)

    def _on_timer(self, call: _Call) -> None:
        call.timer = None
        if call.id not in self._calls:
            return
        if self._blocked():
            call.due = True
            self._wake()
            return
        self._flush(call)

    def _flush(self, call: _Call) -> None:
        call.last = time.monotonic()
        for event in call.events(final=False):
            self._send(event)


TRANSCRIPT_CALL_BYTES = 32 * 1024
"""Characters of one call's live output the transcript keeps (its first events; the model's tool result, also
in the transcript, holds what the command printed, within the tool's own limits)."""


class TranscriptOutput:
    """Which `toolOutput` events a session's transcript keeps: a call's first events, until
    TRANSCRIPT_CALL_BYTES characters, so that 300 noisy commands do not make a transcript of
    hundreds of megabytes that every load must read. Other events are all kept."""

    def __init__(self) -> None:
        self._kept: dict[tuple[str, str], int] = {}

    def keep(self, turn_id: str, event: wev.Ev) -> bool:
        if not isinstance(event, wev.ToolOutputEvent):
            return True
        key = (turn_id, event.tool_call_id)
        kept = self._kept.get(key, 0)
        if kept >= TRANSCRIPT_CALL_BYTES:
            return False
        self._kept[key] = kept + len(event.text)
        return True
