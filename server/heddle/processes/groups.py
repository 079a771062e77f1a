"""The one way Heddle runs a command (Bash, hooks): as the leader of a session and process
group of its own, registered with the reaper, so the whole group dies however the command ends
— finished, timed out, cancelled, or the daemon killed."""

from __future__ import annotations

import os
import signal

import anyio
import anyio.abc

from heddle.processes.reaper import REAPER

KILL_GRACE = 2.0


async def kill_group(process: anyio.abc.Process) -> None:
    """SIGTERM the whole process group, then SIGKILL after a grace period. Never hangs."""
    with anyio.CancelScope(shield=True):
        for sig, wait in ((signal.SIGTERM, KILL_GRACE), (signal.SIGKILL, KILL_GRACE)):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                break
            with anyio.move_on_after(wait):
                await process.wait()
                # the leader is gone; make sure nothing else of its group survives
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                break


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
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    REAPER.forget(process.pid)  # the group is dead: its number may be reused from here on
    with anyio.CancelScope(shield=True), anyio.move_on_after(KILL_GRACE):
        await process.aclose()
