"""Per-turn event stream to the client: sequence numbers and coalesced text deltas.

Consecutive text (or thinking) deltas are merged and flushed when another kind of event comes,
when the buffer reaches FLUSH_CHARS, or FLUSH_DELAY after the first buffered delta — so a fast
model cannot flood a slow editor, and no text waits more than FLUSH_DELAY.
"""

from __future__ import annotations

import asyncio
from typing import Callable

from heddle_protocol import events as wev
from heddle.loop import events as core
from heddle.rpc import convert

FLUSH_CHARS = 4096
FLUSH_DELAY = 0.016


class TurnEmitter:
    def __init__(self, session_id: str, turn_id: str, send: Callable[[wev.TurnEventParams], None]):
        self.session_id = session_id
        self.turn_id = turn_id
        self._send = send
        self._seq = 0
        self._kind: type | None = None
        self._parts: list[str] = []
        self._size = 0
        self._timer: asyncio.TimerHandle | None = None

    def __call__(self, ev: core.CoreEvent) -> None:
        if isinstance(ev, (core.TextDelta, core.ThinkingDelta)):
            if self._kind is not type(ev):
                self.flush()
                self._kind = type(ev)
            self._parts.append(ev.text)
            self._size += len(ev.text)
            if self._size >= FLUSH_CHARS:
                self.flush()
            elif self._timer is None:
                self._timer = asyncio.get_running_loop().call_later(FLUSH_DELAY, self.flush)
            return
        wire_event = convert.event(ev)
        if wire_event is not None:
            self.flush()
            self._emit(wire_event)

    def started(self, prompt: str, model: str) -> None:
        self._emit(wev.TurnStartedEvent(prompt=prompt, model=model))

    def flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._parts:
            return
        text = "".join(self._parts)
        self._parts.clear()
        self._size = 0
        if self._kind is core.ThinkingDelta:
            self._emit(wev.ThinkingDeltaEvent(text=text))
        else:
            self._emit(wev.TextDeltaEvent(text=text))

    def _emit(self, event: wev.Ev) -> None:
        self._send(wev.TurnEventParams(session_id=self.session_id, turn_id=self.turn_id,
                                       seq=self._seq, event=event))
        self._seq += 1
