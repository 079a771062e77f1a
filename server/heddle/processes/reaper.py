"""The reaper: a tiny process that kills every tool process when the daemon dies.

Bash commands and hooks run in process groups of their own (so a terminal's Ctrl-C never
reaches them and a cancel can kill a whole tree). The daemon kills those groups itself when a
command ends or is cancelled, but if the daemon dies abruptly (SIGKILL, a crash, the OOM
killer) nothing would: a long `npm test` would run on with no one to reap it. A parent-death
signal is no answer, since it reaches only the direct child, not the grandchildren in its group.

So before its first tool process the daemon starts the reaper: `python -I -S` running this
file, in a session of its own, with a pipe from the daemon as its stdin. The daemon writes
`+PGID` when a group starts and `-PGID` once it has killed it. When the pipe reaches end of
file — the daemon exited, however it happened: only the daemon holds the pipe's write end — the
reaper SIGKILLs every group still registered and exits. On a normal exit the daemon closes the
pipe and waits for it.

Registering a group takes the daemon a few steps of its event loop after the process started,
and a daemon killed in between would miss it. So every tool process also carries a mark in its
environment (`HEDDLE_REAPER_MARK`, which its children inherit), and the reaper kills whatever
process still has it. A process that drops its environment and leaves its group (`setsid env
-i ...`) is not followed.

This file imports only the standard library: the reaper runs it without Heddle on its path.
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import subprocess
import sys
import threading

log = logging.getLogger(__name__)

CLOSE_TIMEOUT = 2.0
"""Seconds the daemon waits for the reaper to exit after closing its pipe."""
MARK = "HEDDLE_REAPER_MARK"
"""The environment variable every tool process of a daemon carries, with that daemon's value."""
SCAN_PASSES = 5
"""Sweeps for marked processes (one forking while the reaper sweeps is caught by the next)."""


def kill_groups(groups: set[int] | list[int]) -> None:
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:  # gone already, or no longer ours
            pass


def kill_marked(mark: bytes) -> int:
    """SIGKILL every process whose environment holds `mark` (`NAME=value`); how many."""
    killed = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                marked = mark in f.read().split(b"\0")
            if marked:
                os.kill(int(entry), signal.SIGKILL)
                killed += 1
        except OSError:  # gone, or not ours to read
            continue
    return killed


def main(mark: str) -> None:
    """The reaper process: read `+PGID`/`-PGID` lines until end of input, then kill the rest."""
    groups: set[int] = set()

    def finish(*_: object) -> None:
        kill_groups(groups)
        for _ in range(SCAN_PASSES):
            if not kill_marked(f"{MARK}={mark}".encode()):
                break
        os._exit(0)

    # A terminal's signals are not meant for the reaper (it is in a session of its own anyway);
    # SIGTERM (a system shutting down) does what the daemon's death does.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, finish)
    pending = b""
    while True:
        try:
            chunk = os.read(0, 4096)
        except OSError:
            break
        if not chunk:
            break
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            try:
                pgid = int(line[1:])
            except ValueError:
                continue
            if line.startswith(b"+"):
                groups.add(pgid)
            elif line.startswith(b"-"):
                groups.discard(pgid)
    finish()


class Reaper:
    """The daemon's side: starts the reaper before the first tool process and tells it about
    each group.

    Writes are a few bytes to a pipe the reaper keeps draining, so they never block for long;
    a reaper that died (someone killed it) is replaced at the next write, with every live group.
    """

    def __init__(self) -> None:
        self.mark = f"{os.getpid()}-{secrets.token_hex(8)}"
        self._command = [sys.executable, "-I", "-S", os.path.abspath(__file__), self.mark]
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._groups: set[int] = set()
        self._failed = False

    @property
    def pid(self) -> int | None:
        """The reaper's pid, None before the first group (for tests and the log)."""
        return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        """Have the reaper running before a tool process starts (once; a no-op after)."""
        with self._lock:
            if self._proc is None:
                self._start()

    def env(self, env: dict[str, str] | None) -> dict[str, str]:
        """`env` (None: this process's) with this daemon's mark, for a tool process."""
        return {**(os.environ if env is None else env), MARK: self.mark}

    def watch(self, pgid: int) -> None:
        """A tool process group started: kill it if the daemon dies."""
        with self._lock:
            self._groups.add(pgid)
            self._send(b"+%d\n" % pgid)

    def forget(self, pgid: int) -> None:
        """The group was killed (or is about to be released): leave it alone from now on."""
        with self._lock:
            if pgid in self._groups:
                self._groups.discard(pgid)
                self._send(b"-%d\n" % pgid)

    def kill_all(self) -> None:
        """SIGKILL every registered group now (a daemon exiting at once)."""
        with self._lock:
            kill_groups(self._groups)

    def close(self) -> None:
        """The daemon exits normally: the reaper kills what is left, exits, and is reaped."""
        with self._lock:
            proc, self._proc = self._proc, None
            self._groups.clear()
        if proc is None:
            return
        proc.stdin.close()
        self._stop(proc)

    def _send(self, line: bytes) -> None:
        for _ in range(2):  # the reaper we had may be gone: one new one, then give up
            fresh = self._proc is None
            if fresh and not self._start():
                return
            # a new reaper hears of every live group at once (this line's change included)
            data = b"".join(b"+%d\n" % pgid for pgid in self._groups) if fresh else line
            try:
                if data:
                    os.write(self._proc.stdin.fileno(), data)
                return
            except OSError as exc:
                log.warning("the reaper (pid %d) is gone (%s); starting another",
                            self._proc.pid, exc)
                self._stop(self._proc)
                self._proc = None

    def _start(self) -> bool:
        if self._failed:
            return False
        try:
            self._proc = subprocess.Popen(
                self._command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, cwd="/",
                start_new_session=True)
        except OSError as exc:
            self._failed = True  # said once; tools still run, unguarded
            log.warning("cannot start the reaper (%s): tool processes would outlive a daemon "
                        "that is killed", exc)
            return False
        log.debug("reaper started (pid %d)", self._proc.pid)
        return True

    @staticmethod
    def _stop(proc: subprocess.Popen) -> None:
        try:
            proc.wait(CLOSE_TIMEOUT)
        except subprocess.TimeoutExpired:
            log.warning("the reaper (pid %d) did not exit; killing it", proc.pid)
            proc.kill()
            proc.wait()


REAPER = Reaper()
"""The daemon's one reaper."""


if __name__ == "__main__":
    main(sys.argv[1])
