"""The prompt cache: what earlier requests wrote, and what one request reads and writes.

The rules are the Messages API's (docs/scripted-model.md cites them). A breakpoint's prefix is
everything up to and including its block. A request reads the longest prefix an earlier
request cached that is still alive, looking from each breakpoint (the last first) back over
at most 20 blocks, the breakpoint's own block included. Then the prefix through every block up
to the last breakpoint is in the cache: as in the docs' lookback example, where a request that
changed block 25 reads the prefix through block 24 that an earlier request wrote when it cached
block 30. Each gets the lifetime of the first breakpoint at or after it (5 minutes, or 1 hour
with `"ttl": "1h"`); one already there is refreshed. Prefixes shorter than the model's minimum
are neither written nor read. Entries are
keyed by the imitated model and the exact prefix text (plus tool_choice, the thinking setting
and whether images are present, for prefixes that reach into `messages`): scenarios share them
like an organisation's requests do.

Billing follows the API's "mixing TTLs" positions: A = the tokens read, B = the last 1-hour
breakpoint past A (else A), C = the last breakpoint; 1-hour writes are B - A, 5-minute writes
C - B, and `input_tokens` is what follows C (or A).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .prompt import Prompt

__all__ = ["LOOKBACK", "Breakpoint", "CacheAccount", "ManualClock", "PromptCache"]

LOOKBACK = 20
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
MAX_ENTRIES = 50_000  # least recently used entries beyond this are forgotten


@dataclass(frozen=True)
class Breakpoint:
    location: str  # "tools.3", "system.0", "messages.4.content.1"
    tokens: int  # tokens of the prefix through this block
    ttl: str
    cacheable: bool  # the prefix reaches the model's minimum cacheable length


@dataclass(frozen=True)
class CacheAccount:
    """What one request read from and wrote to the cache, in tokens."""

    breakpoints: tuple[Breakpoint, ...]
    read_location: str | None  # the block whose cached prefix was read; None: no hit
    read_tokens: int
    written: tuple[str, ...]  # breakpoints whose prefix was written (billed as creation)
    creation_5m: int
    creation_1h: int
    input_tokens: int
    minimum: int

    @property
    def creation_tokens(self) -> int:
        return self.creation_5m + self.creation_1h

    def usage(self) -> dict[str, Any]:
        """The input half of the API's `usage` object."""
        return {"input_tokens": self.input_tokens,
                "cache_creation_input_tokens": self.creation_tokens,
                "cache_read_input_tokens": self.read_tokens,
                "cache_creation": {"ephemeral_5m_input_tokens": self.creation_5m,
                                   "ephemeral_1h_input_tokens": self.creation_1h}}


def uncached(input_tokens: int, minimum: int = 0) -> CacheAccount:
    return CacheAccount((), None, 0, (), 0, 0, input_tokens, minimum)


class ManualClock:
    """A clock for tests: it stands still until `advance` or `set` moves it (seconds)."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def set(self, now: float) -> None:
        self.now = now


@dataclass
class _Entry:
    ttl: float
    expires: float


class PromptCache:
    """Cache entries shared by every scenario of one server; safe to use from any thread."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[str, bytes, bytes], _Entry] = OrderedDict()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def account(self, prompt: Prompt, *, model: str, minimum: int) -> CacheAccount:
        """Read and write the cache for one answered request; returns what it did."""
        def key(i: int) -> tuple[str, bytes, bytes]:
            block = prompt.blocks[i]
            extra = prompt.messages_context if block.section == "messages" else b""
            return model, extra, block.digest

        with self._lock:
            now = self._clock()
            points = prompt.breakpoints
            cached = [i for i in points if prompt.tokens_at(i) >= minimum]
            hit = self._lookup(prompt, points, key, now, minimum)
            start = 0
            for point in cached:
                ttl = TTL_SECONDS[prompt.blocks[point].ttl or "5m"]
                for i in range(start, point + 1):
                    if prompt.tokens_at(i) >= minimum:
                        self._touch(key(i), ttl, now)
                start = point + 1
        read = prompt.tokens_at(hit) if hit is not None else 0
        new = [i for i in cached if hit is None or i > hit]
        last = prompt.tokens_at(new[-1]) if new else read
        hours = [i for i in new if prompt.blocks[i].ttl == "1h"]
        hour_end = prompt.tokens_at(hours[-1]) if hours else read
        return CacheAccount(
            breakpoints=tuple(Breakpoint(prompt.blocks[i].location, prompt.tokens_at(i),
                                         prompt.blocks[i].ttl or "5m", i in cached)
                              for i in points),
            read_location=prompt.blocks[hit].location if hit is not None else None,
            read_tokens=read,
            written=tuple(prompt.blocks[i].location for i in new),
            creation_5m=last - hour_end,
            creation_1h=hour_end - read,
            input_tokens=prompt.tokens - last,
            minimum=minimum,
        )

    def _lookup(self, prompt: Prompt, points: list[int], key: Callable[[int], Any], now: float,
                minimum: int) -> int | None:
        """The block ending the longest live cached prefix the lookback reaches, if any."""
        for point in reversed(points):
            for i in range(point, max(point - LOOKBACK, -1), -1):
                if prompt.tokens_at(i) < minimum:
                    break  # earlier prefixes are shorter still
                entry = self._entries.get(key(i))
                if entry is not None and now < entry.expires:
                    return i
        return None

    def _touch(self, key: tuple[str, bytes, bytes], ttl: float, now: float) -> None:
        """Write or refresh an entry (a read is refreshed this way too, since it lies within a
        prefix the request writes); a refresh keeps the longer of the two lifetimes."""
        entry = self._entries.get(key)
        if entry is None or now >= entry.expires:
            entry = self._entries[key] = _Entry(ttl, now + ttl)
        entry.ttl = max(entry.ttl, ttl)
        entry.expires = max(entry.expires, now + entry.ttl)
        self._entries.move_to_end(key)
        while len(self._entries) > MAX_ENTRIES:
            self._entries.popitem(last=False)
