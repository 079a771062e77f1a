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
POLL = 0.02
"""Seconds between two looks at whether the killed processes are gone."""


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
    a killed process still runs for a moment, and its caller is told it is gone. /proc is
    read once a round, not at every look: only the members found are watched, then the group
    is looked for again (one that joined meanwhile got the round's SIGKILL too)."""
    with anyio.CancelScope(shield=True), anyio.move_on_after(KILL_GRACE) as scope:
        while _signal(pgid, signal.SIGKILL):
            members = group_members(pgid)
            if members == []:
                break
            while any(_member_runs(pid, pgid) for pid in members or ()):
                await anyio.sleep(POLL)
            if members is None:  # no /proc to tell: the signal's answer is all there is
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


def _stat(pid: int | str) -> tuple[bytes, int] | None:
    """A process's state letter and group, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return fields[0], int(fields[2])
    except (OSError, IndexError, ValueError):
        return None


def _member_runs(pid: int, pgid: int) -> bool:
    """Whether `pid` still runs in group `pgid`. A zombie (dead, waiting to be reaped: on some
    machines nothing reaps orphans) does not; nor does a new process that took its number."""
    stat = _stat(pid)
    return stat is not None and stat[1] == pgid and stat[0] not in (b"Z", b"X")


def group_members(pgid: int) -> list[int] | None:
    """The processes of group `pgid` that run; None without /proc to list them."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    return [int(entry) for entry in entries
            if entry.isdigit() and _member_runs(int(entry), pgid)]


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
