"""Processes in tests: whether one still runs, and waiting for a group to be gone.

A zombie (killed, waiting for its parent to reap it) does not count as running: on some
machines nothing reaps orphans. SIGKILL is delivered asynchronously, so checks after a kill
wait a moment for the kernel to finish the job.
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


async def all_dead(pids: list[int], within: float = 3.0) -> bool:
    with anyio.move_on_after(within):
        while any(alive(p) for p in pids):
            await anyio.sleep(0.02)
    return not any(alive(p) for p in pids)


def wait_dead(pids: list[int], deadline: float) -> list[int]:
    """Wait (blocking) until every pid is gone or the monotonic deadline; the survivors."""
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.02)
    return [p for p in pids if alive(p)]
