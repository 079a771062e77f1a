"""Per-turn event stream to the client: sequence numbers and coalesced text deltas.

Consecutive text (or thinking) deltas are merged. While the client keeps up, they are sent when
another kind of event comes, when FLUSH_CHARS have gathered, or FLUSH_DELAY after the previous
text notification — at once if that was longer ago, once the deltas that arrived together have
been merged — so a fast model cannot flood a slow editor, text after a pause is not held back,
and no text waits more than FLUSH_DELAY.

While the client is behind (the transport's `Pressure`), a turn's events wait here instead of
in the transport, in order, with its text merged into notifications of up to BACKLOG_CHARS;
they go out as the client catches up, turns taking turns. So the transport's buffer stays near
its high-water mark, and what other sessions send (answers, permission requests) waits only
for that, not for everything a busy turn produced. Two things send a turn's waiting events at
once, whatever the pressure, because a message outside the turn's events must follow them: a
permission request (after its `permissionAsked` event) and the turn's end (`flush`, before the
`turn/start` answer). Nothing is dropped, a turn's events never change order, and `seq` stays
contiguous.

A turn that produces much more than the client reads pauses: `behind` is true once it holds
PAUSE_CHARS of text or PAUSE_EVENTS events that wait for the client, and the loop waits for
`writable()` before it takes the next event from the model. So what the daemon holds for a
stalled client is bounded by a constant per running turn, and the other turns go on.

The live output of running commands (`toolOutput`) never enters that queue: `output.LiveOutput`
keeps it per call, bounded, and sends it while the client keeps up. So a control event (a
call's end, a permission request, the turn's end) waits behind nothing but other control
events and text, and at most one `toolOutput` per stream of the call it finishes (that call's
last output, which goes just before it).
"""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Callable

from heddle_protocol import events as wev
from heddle.core import events as core
from heddle.rpc import convert
from heddle.rpc.output import LiveOutput
from heddle.rpc.transport import PRESSURE, Pressure

FLUSH_CHARS = 4096
FLUSH_DELAY = 0.016
BACKLOG_CHARS = 64 * 1024
"""Most text in one notification when waiting text goes out after the client caught up."""
PAUSE_CHARS = 64 * 1024
PAUSE_EVENTS = 256
"""While the client is behind, a turn holding this much text or this many events is asked to
pause (`behind`) until it catches up; a turn holding less goes on, so one busy turn never stops
the others."""

_DELTAS = (core.TextDelta, core.ThinkingDelta)


class _Text:
    """Merged text waiting in the queue."""

    __slots__ = ("kind", "text")

    def __init__(self, kind: type, text: str):
        self.kind = kind
        self.text = text


class TurnEmitter:
    def __init__(self, session_id: str, turn_id: str, send: Callable[[wev.TurnEventParams], None],
                 pressure: Pressure | None = None):
        self.session_id = session_id
        self.turn_id = turn_id
        self._send = send
        self._pressure = PRESSURE if pressure is None else pressure
        self._seq = 0
        self._kind: type | None = None
        self._parts: list[str] = []
        """Deltas not merged yet (at most about FLUSH_CHARS)."""
        self._size = 0
        self._queue: collections.deque[_Text | wev.Ev] = collections.deque()
        """Events waiting for the client to catch up, oldest first."""
        self._queued_text = 0
        """Characters of text in `_queue`."""
        self._timer: asyncio.Handle | None = None
        self._sent_at = float("-inf")
        """Loop time of the last text notification."""
        self._waiting = False
        """Registered to send the queue once the client catches up."""
        self._output = LiveOutput(self._emit, self._held, self._wake)

    def __call__(self, ev: core.CoreEvent) -> None:
        if isinstance(ev, _DELTAS):
            if self._kind is not type(ev):
                self._merge()
                self._kind = type(ev)
            self._parts.append(ev.text)
            self._size += len(ev.text)
            if self._size >= FLUSH_CHARS:
                self._pump(force=False)
            elif self._timer is None and not self._waiting:
                loop = asyncio.get_running_loop()
                wait = self._sent_at + FLUSH_DELAY - time.monotonic()
                if wait <= 0:  # quiet until now: send once this burst is merged
                    self._timer = loop.call_soon(self._on_timer)
                else:
                    self._timer = loop.call_later(wait, self._on_timer)
            return
        inner = ev.event if isinstance(ev, core.AgentEvent) else ev
        if isinstance(inner, core.ToolOutputChunk):
            self._output.add(inner, _as_is if inner is ev else _under(ev))
            return
        wire_event = convert.event(ev)
        if wire_event is not None:
            self._merge()
            if isinstance(inner, core.ToolCallFinished):
                self._queue.extend(self._output.finish(inner.tool_call_id))
            elif isinstance(ev, core.TurnEnded):
                self._queue.extend(self._output.close())
            self._queue.append(wire_event)
            self._pump(force=isinstance(ev, core.PermissionAsked))

    def started(self, prompt: str, model: str) -> None:
        self._queue.append(wev.TurnStartedEvent(prompt=prompt, model=model))
        self._pump(force=False)

    def flush(self) -> None:
        """Send everything now, whatever the pressure (at the end of the turn)."""
        self._queue.extend(self._output.close())
        self._pump(force=True)

    @property
    def holding(self) -> int:
        """Characters of text not sent yet."""
        return self._size + self._queued_text

    @property
    def queued(self) -> int:
        """Events (merged text included) waiting for the client to catch up."""
        return len(self._queue) + (1 if self._parts else 0)

    @property
    def behind(self) -> bool:
        """The editor is not keeping up and this turn holds enough that it should pause."""
        return self._pressure.backed_up and (
            self.holding >= PAUSE_CHARS or len(self._queue) >= PAUSE_EVENTS)

    async def writable(self) -> None:
        """Return once this turn need not pause (at once if it need not).

        A caller that awaits this between events stops producing while the editor does not
        read, so what waits for it stops growing.
        """
        while self.behind:
            await self._pressure.wait()

    def _on_timer(self) -> None:
        self._timer = None
        self._pump(force=False)

    def _held(self) -> bool:
        """Output must wait: the client is behind, or queued events go first."""
        return self._pressure.backed_up or bool(self._queue)

    def _wake(self) -> None:
        """Pump once the client catches up (queued events first, then waiting output)."""
        if not self._waiting and self._pressure.backed_up:
            self._waiting = True
            self._pressure.when_relieved(self._on_relief)

    def _on_relief(self) -> None:
        self._waiting = False
        self._pump(force=False)

    def _merge(self) -> None:
        """Turn the pending deltas into one queued piece of text."""
        if self._parts:
            text = self._parts[0] if len(self._parts) == 1 else "".join(self._parts)
            self._queue.append(_Text(self._kind, text))
            self._queued_text += len(text)
            self._parts.clear()
            self._size = 0

    def _pump(self, force: bool) -> None:
        """Send queued events in order until the client is behind (unless `force`)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._merge()
        queue = self._queue
        while queue:
            if not force and self._pressure.backed_up:
                if not self._waiting:
                    self._waiting = True
                    self._pressure.when_relieved(self._on_relief)
                return
            item = queue.popleft()
            if not isinstance(item, _Text):
                self._emit(item)
                continue
            pieces, size = [item.text], len(item.text)
            while (queue and isinstance(queue[0], _Text) and queue[0].kind is item.kind
                   and size + len(queue[0].text) <= BACKLOG_CHARS):
                size += len(queue[0].text)
                pieces.append(queue.popleft().text)
            self._queued_text -= size
            text = pieces[0] if len(pieces) == 1 else "".join(pieces)
            self._sent_at = time.monotonic()
            if item.kind is core.ThinkingDelta:
                self._emit(wev.ThinkingDeltaEvent(text=text))
            else:
                self._emit(wev.TextDeltaEvent(text=text))
        self._output.send_due()

    def _emit(self, event: wev.Ev) -> None:
        self._send(wev.TurnEventParams(session_id=self.session_id, turn_id=self.turn_id,
                                       seq=self._seq, event=event))
        self._seq += 1


def _as_is(event: wev.Ev) -> wev.Ev:
    return event


def _under(ev: core.AgentEvent) -> Callable[[wev.Ev], wev.Ev]:
    """A sub-agent's output event, shown under its Task call."""
    return lambda event: wev.AgentEventEvent(tool_call_id=ev.tool_call_id, agent=ev.agent,
                                             event=event)
