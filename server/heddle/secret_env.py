"""Secrets in the process environment: taken out of it at start-up and held in memory only.

What the daemon's environment holds, its tools can read: children inherit it, and any process
of the same user can read /proc/PID/environ (`ps e` shows it too), which is the block of
`NAME=value` strings the kernel copied at exec — `unsetenv` leaves those bytes in place. So the
daemon and `heddle ask`, before anything else (no thread, no child yet), call `hold()`, which

- moves every secret variable (`is_secret`) out of `os.environ`, and so out of the environment
  children inherit, into this module (`environ()` gives it back to the code that needs it);
- overwrites those strings in the exec-time block with NUL bytes, through /proc/self/mem (a bad
  address fails there instead of crashing the process); and
- makes the process not dumpable (`prctl(PR_SET_DUMPABLE, 0)`): another non-root process of
  the user can then neither read its /proc/PID/{environ,mem} nor attach a debugger to it, so
  what it holds in memory stays there. The cost: no core dumps and no `py-spy --pid`;
  `HEDDLE_DUMPABLE=1` keeps the process dumpable for such debugging.

The last two are Linux only; elsewhere the secrets still leave the environment children
inherit. All of it costs about 3 ms (mostly importing ctypes for prctl).
"""

from __future__ import annotations

import os
import sys

SECRET_MARKERS = ("API_KEY", "APIKEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")

MODEL_SECRETS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
"""The model endpoint's credentials: held by the daemon, never passed on to a tool."""

PR_SET_DUMPABLE = 4

_held: dict[str, str] = {}


def is_secret(name: str) -> bool:
    return name in MODEL_SECRETS or any(marker in name.upper() for marker in SECRET_MARKERS)


def environ() -> dict[str, str]:
    """This process's environment as it was started: `os.environ` plus the held secrets."""
    return {**os.environ, **_held}


def hold() -> list[str]:
    """Take the secrets out of this process's environment (see the module's docstring).

    Returns what could not be done, for the log: an empty list when the secrets are gone from
    every place a child process can read."""
    names = [name for name in os.environ if is_secret(name)]
    for name in names:
        _held[name] = os.environ.pop(name)  # pop() also unsetenv()s it
    problems = []
    if sys.platform.startswith("linux"):
        if names and (left := _wipe_exec_block()):
            problems.append(f"/proc/{os.getpid()}/environ still shows {', '.join(left)}")
        if os.environ.get("HEDDLE_DUMPABLE") != "1" and (problem := _not_dumpable()):
            problems.append(problem)
    return problems


def _wipe_exec_block() -> list[str]:
    """Overwrite the secrets' `NAME=value` strings in the environment block recorded at exec;
    returns the names still shown (none when it worked)."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        start = int(fields[47])  # env_start: field 50 of proc(5), counted from field 3
        with open("/proc/self/environ", "rb") as f:
            block = f.read()
        mem = os.open("/proc/self/mem", os.O_RDWR)
        try:
            offset = 0
            for entry in block.split(b"\0"):
                if entry and is_secret(os.fsdecode(entry.partition(b"=")[0])):
                    os.pwrite(mem, bytes(len(entry)), start + offset)
                offset += len(entry) + 1
        finally:
            os.close(mem)
        with open("/proc/self/environ", "rb") as f:
            shown = f.read().split(b"\0")
    except (OSError, IndexError, ValueError) as exc:
        return [f"the secrets ({exc})"]
    return [name for entry in shown if entry
            and is_secret(name := os.fsdecode(entry.partition(b"=")[0]))]


def _not_dumpable() -> str | None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        return f"prctl(PR_SET_DUMPABLE) failed: {os.strerror(ctypes.get_errno())}"
    return None
