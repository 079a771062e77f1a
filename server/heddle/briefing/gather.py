"""Gathering facts concurrently within a time bound: what is not ready in time is left out.

A turn's first model call waits for its briefing; a slow or huge repository must not hold it
up. Each source is an async callable; all start at once, and when the bound passes, those
still running are cancelled (their processes killed) and named, so the briefing can say what
it left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Mapping

import anyio

Source = Callable[[], Awaitable[Any]]

BOUND = 0.2
"""Seconds the first model call of a session may wait for its environment."""


@dataclass(frozen=True)
class Gathered:
    values: dict[str, Any]
    """Each source that finished in time: its value (None: it had nothing to say)."""
    late: tuple[str, ...]
    """The sources still running when the bound passed, in the order given."""
    failed: tuple[str, ...] = ()
    """The sources that raised an OSError (a program missing, a folder gone)."""


async def gather(sources: Mapping[str, Source], bound: float = BOUND) -> Gathered:
    """Run every source concurrently for at most `bound` seconds."""
    values: dict[str, Any] = {}
    failed: list[str] = []

    async def one(name: str, source: Source) -> None:
        try:
            values[name] = await source()
        except OSError:
            failed.append(name)

    with anyio.move_on_after(bound):
        async with anyio.create_task_group() as tg:
            for name, source in sources.items():
                tg.start_soon(one, name, source)
    late = tuple(n for n in sources if n not in values and n not in failed)
    return Gathered(values, late, tuple(n for n in sources if n in failed))
