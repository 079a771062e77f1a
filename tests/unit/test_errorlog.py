"""The log of requests pygls refused is bounded: the first few of each interval one by one,
then one count, written once the interval is over."""

from __future__ import annotations

import logging

from heddle.rpc.errorlog import BURST, INTERVAL, LINE_CHARS, RequestErrors


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.due: list[tuple[float, object]] = []

    def later(self, delay: float, fn) -> None:
        self.due.append((self.now + delay, fn))

    def advance(self, seconds: float) -> None:
        self.now += seconds
        for at, fn in [d for d in self.due if d[0] <= self.now]:
            self.due.remove((at, fn))
            fn()


def test_a_flood_is_logged_as_the_first_few_then_one_count_per_interval(caplog):
    clock = Clock()
    errors = RequestErrors(clock=lambda: clock.now, later=clock.later)
    caplog.set_level(logging.INFO, logger="heddle.rpc.errorlog")
    for n in range(1000):
        errors.report("FeatureRequestError", f"Method Not Found: nope/{n}")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [f"FeatureRequestError: Method Not Found: nope/{n}" for n in range(BURST)]
    clock.advance(INTERVAL)  # nothing more arrives: the count still goes out
    assert caplog.records[-1].getMessage().startswith(f"{1000 - BURST} more requests failed")
    caplog.clear()
    errors.report("FeatureRequestError", "x" * 10_000)  # a new interval: one by one again
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith("FeatureRequestError: xxx") and len(line) < LINE_CHARS + 60
    clock.advance(INTERVAL)
    assert len(caplog.records) == 1  # nothing held, nothing counted
