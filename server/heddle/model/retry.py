"""The bounded retry policy for model calls: which failures retry, and how long to wait."""

from __future__ import annotations

import random

import msgspec


class RetryPolicy(msgspec.Struct, frozen=True):
    max_retries: int = 4
    """Requests after the first: one model call makes at most `max_attempts` requests."""
    base_delay: float = 0.5
    max_delay: float = 16.0
    max_retry_after: float = 60.0
    """A server's `retry-after` longer than this is not waited out: the call fails instead."""

    @property
    def max_attempts(self) -> int:
        return self.max_retries + 1

    def delay(self, attempt: int, retry_after: float | None, rand: random.Random) -> float | None:
        """Seconds before retry number `attempt` (1-based), or None when not to retry."""
        if attempt > self.max_retries:
            return None
        if retry_after is not None:
            return retry_after if retry_after <= self.max_retry_after else None
        backoff = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        return backoff * (0.75 + 0.25 * rand.random())


def parse_retry_after(headers) -> float | None:
    """Seconds from `retry-after-ms` or `retry-after` (seconds only), if present and sane."""
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            value = float(raw) * scale
        except ValueError:
            continue
        if value >= 0:
            return value
    return None
