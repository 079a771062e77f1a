"""The log of requests answered with an error (pygls reports each: an unknown method, params
that do not fit, a session that does not exist): a client can send them as fast as it likes,
so their lines are bounded.

Each is still answered (pygls sends the JSON-RPC error before it reports it); only the log is
thinned: the first `BURST` lines of each `INTERVAL` are written as they come, the rest
are counted and the count written once the interval has passed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable

log = logging.getLogger(__name__)

BURST = 5
"""Lines written one by one in each interval."""
INTERVAL = 10.0
"""Seconds; what comes after the burst is written as one count per interval."""
LINE_CHARS = 200
"""A line at most this long: a method name is whatever the client sent."""


def _later(delay: float, fn: Callable[[], None]) -> None:
    asyncio.get_running_loop().call_later(delay, fn)


class RequestErrors:
    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 later: Callable[[float, Callable[[], None]], None] = _later) -> None:
        self._clock = clock
        self._later = later
        self._ends = float("-inf")
        """When the current interval ends."""
        self._said = 0
        self._held = 0
        """Failures this interval past the burst, not written yet."""

    def report(self, source: str, error: object) -> None:
        now = self._clock()
        if now >= self._ends:
            self.flush()
            self._ends, self._said = now + INTERVAL, 0
        if self._said < BURST:
            self._said += 1
            log.info("%s: %s", source, _cut(str(error)))
            return
        self._held += 1
        if self._held == 1:  # the count goes out once the interval is over, even if all is quiet
            self._later(self._ends - now, self.flush)

    def flush(self) -> None:
        if self._held:
            log.info("%d more requests failed like these in the last %g s (not logged one by "
                     "one)", self._held, INTERVAL)
            self._held = 0


def _cut(text: str) -> str:
    return text if len(text) <= LINE_CHARS else text[:LINE_CHARS] + f"… ({len(text)} characters)"


REQUEST_ERRORS = RequestErrors()
"""The daemon's: one log per process."""
