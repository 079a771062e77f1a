"""Per-turn event stream to the client: sequence numbers and coalesced text deltas.

Consecutive text (or thinking) deltas are merged. While the client keeps up, they are sent when
another kind of event comes, when FLUSH_CHARS have gathered, or FLUSH_DELAY after the first
of them — so a fast model cannot flood a slow editor, and no text waits more than FLUSH_DELAY.

While the client is behind (the transport's `Pressure`), text waits in memory instead, merged
into pieces of FLUSH_CHARS, and goes out in notifications of up to BACKLOG_CHARS as soon as
the client catches up; turns with text waiting take turns. Every other event first sends the
text before it, whatever the pressure, so a turn's events never change order and `seq` stays
contiguous.
"""

from __future__ import annotations

import asyncio
from typing import Callable

from heddle_protocol import events as wev
from heddle.loop import events as core
from heddle.rpc import convert
from heddle.rpc.transport import PRESSURE, Pressure

FLUSH_CHARS = 4096
FLUSH_DELAY = 0.016
BACKLOG_CHARS = 64 * 1024
"""Most text in one notification when held text goes out after the client caught up."""

_DELTAS = (core.TextDelta, core.ThinkingDelta)


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
        """Deltas since the last merge."""
        self._size = 0
        self._held: list[str] = []
        """Merged text (pieces of about FLUSH_CHARS) not sent yet."""
        self._timer: asyncio.TimerHandle | None = None
        self._waiting = False
        """Registered to send held text once the client catches up."""

    def __call__(self, ev: core.CoreEvent) -> None:
        if isinstance(ev, _DELTAS):
            if self._kind is not type(ev):
                self.flush()
                self._kind = type(ev)
            self._parts.append(ev.text)
            self._size += len(ev.text)
            if self._size >= FLUSH_CHARS:
                self._send_text(force=False)
            elif self._timer is None and not self._waiting:
                self._timer = asyncio.get_running_loop().call_later(FLUSH_DELAY, self._on_timer)
            return
        wire_event = convert.event(ev)
        if wire_event is not None:
            self.flush()
            self._emit(wire_event)

    def started(self, prompt: str, model: str) -> None:
        self._emit(wev.TurnStartedEvent(prompt=prompt, model=model))

    def flush(self) -> None:
        """Send all text now, whatever the pressure (before another event, at the end)."""
        self._send_text(force=True)

    @property
    def holding(self) -> int:
        """Characters of text waiting to be sent."""
        return self._size + sum(len(p) for p in self._held)

    async def writable(self) -> None:
        """Return once the client is not behind (at once if it is not).

        A caller that awaits this between events stops producing while the editor does not
        read, so the text held for it stops growing.
        """
        await self._pressure.wait()

    def _on_timer(self) -> None:
        self._timer = None
        self._send_text(force=False)

    def _on_relief(self) -> None:
        self._waiting = False
        self._send_text(force=False)

    def _merge(self) -> None:
        if self._parts:
            self._held.append(self._parts[0] if len(self._parts) == 1 else "".join(self._parts))
            self._parts.clear()
            self._size = 0

    def _send_text(self, force: bool) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._merge()
        held = self._held
        while held:
            if not force and self._pressure.backed_up:
                if not self._waiting:
                    self._waiting = True
                    self._pressure.when_relieved(self._on_relief)
                return
            size, n = len(held[0]), 1
            while n < len(held) and size + len(held[n]) <= BACKLOG_CHARS:
                size += len(held[n])
                n += 1
            text = held[0] if n == 1 else "".join(held[:n])
            del held[:n]
            if self._kind is core.ThinkingDelta:
                self._emit(wev.ThinkingDeltaEvent(text=text))
            else:
                self._emit(wev.TextDeltaEvent(text=text))

    def _emit(self, event: wev.Ev) -> None:
        self._send(wev.TurnEventParams(session_id=self.session_id, turn_id=self.turn_id,
                                       seq=self._seq, event=event))
        self._seq += 1
