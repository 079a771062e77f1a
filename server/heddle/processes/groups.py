"""The one way Heddle runs a command (Bash, hooks): as the leader of a session and process
group of its own, registered with the reaper, so the whole group dies however the command ends
— finished, timed out, cancelled, or the daemon killed."""

from __future__ import annotations

import logging
import os
import signal

import anyio
import anyio.abc

from heddle.processes.reaper import REAPER

log = logging.getLogger(__name__)

KILL_GRACE = 2.0
"""Seconds a group has to end on SIGTERM before SIGKILL; and, after SIGKILL, to be gone."""
POLL = 0.005


async def kill_group(process: anyio.abc.Process) -> None:
    """SIGTERM the whole process group; SIGKILL it once the leader has gone or after
    KILL_GRACE; return once none of its processes runs. Shielded, never hangs."""
    with anyio.CancelScope(shield=True):
        if _signal(process.pid, signal.SIGTERM):
            with anyio.move_on_after(KILL_GRACE):
                await process.wait()
        await _end_group(process.pid)


async def _end_group(pgid: int) -> None:
    """SIGKILL what is left of the group and wait until none of it runs (at most KILL_GRACE):
    a killed process still runs for a moment, and its caller is told it is gone."""
    with anyio.CancelScope(shield=True), anyio.move_on_after(KILL_GRACE) as scope:
        while _signal(pgid, signal.SIGKILL) and group_runs(pgid):
            await anyio.sleep(POLL)
    if scope.cancelled_caught:
        log.warning("process group %d still runs %g s after SIGKILL", pgid, KILL_GRACE)


def _signal(pgid: int, sig: int) -> bool:
    """Send `sig` to the group; False if no process of it is left (or none is ours)."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def group_runs(pgid: int) -> bool:
    """Whether a process of group `pgid` still runs. A zombie (dead, waiting to be reaped:
    on some machines nothing reaps orphans) does not; without /proc every member counts."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):  # gone meanwhile
            continue
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


async def open_group(command: list[str], env: dict[str, str] | None,
                     **kwargs) -> anyio.abc.Process:
    """Start `command` (with `env`; None: the daemon's) as the leader of a new session and
    process group that the reaper kills if the daemon dies; release it with `reap`."""
    REAPER.start()
    # Shielded: a cancel while the spawn completes would leave a started process nobody reaps
    # (asyncio then kills only its leader, and the rest of its group lives on).
    with anyio.CancelScope(shield=True):
        process = await anyio.open_process(command, env=REAPER.env(env),
                                           start_new_session=True, **kwargs)
        REAPER.watch(process.pid)
    return process


async def reap(process: anyio.abc.Process) -> None:
    """However a command ended: kill its whole group (the command if it still runs, its stray
    background children if not), then release the process. Shielded, never hangs."""
    if process.returncode is None:
        await kill_group(process)
    else:
        await _end_group(process.pid)
    REAPER.forget(process.pid)  # the group is dead: its number may be reused from here on
    with anyio.CancelScope(shield=True), anyio.move_on_after(KILL_GRACE):
        await process.aclose()
