"""What the briefing says about the workspace's git repository, asked of git without letting the
workspace run anything.

The workspace is untrusted, and so is its `.git/config`: a repository can name programs that
git runs on its own (`core.fsmonitor` on every status, a `filter.<driver>.clean` for files
whose stat changed, `core.pager`, `gpg.program` for `log.showSignature`). So every git here
runs with no pager, no system config, the fsmonitor, hooks, signatures and fetching of missing
objects off, submodules left alone, and every filter driver the repository's own config defines
emptied (`-c filter.<name>.clean=` turns it off); its stdin is closed, its environment is only
PATH, HOME and the XDG folders (so the user's own `~/.gitconfig` still counts), its output
bounded, and it is killed when its time is up.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.to_thread

TIMEOUT = 2.0
"""Seconds any one git command may run (the briefing's own bound is much shorter)."""
STATUS_LINES = 40
"""Lines of `git status --short` the briefing shows at most."""
LOG_COUNT = 5
LINE_LIMIT = 160
"""Characters of one commit line shown at most (a subject can be a paragraph)."""
OUTPUT_LIMIT = 64_000
"""Bytes of a command's output used at most (the rest is dropped, and said to be)."""

SAFE = ("--no-pager", "-c", "core.fsmonitor=false", "-c", "core.untrackedCache=false",
        "-c", "core.hooksPath=/dev/null", "-c", "log.showSignature=false",
        "-c", "protocol.allow=never", "-c", "diff.external=", "-c", "core.pager=cat",
        "-c", "color.ui=false", "-c", "core.quotePath=false")
KEPT_ENV = ("PATH", "HOME", "XDG_CONFIG_HOME", "LANG", "LC_ALL", "LC_CTYPE", "SystemRoot")
FILTER_KEY = re.compile(r"filter\.(.+)\.(clean|smudge|process)", re.IGNORECASE)
UNTRUSTED_SCOPES = ("local", "worktree")


def git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in KEPT_ENV}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0",
               GIT_NO_LAZY_FETCH="1", GIT_PAGER="cat", PAGER="cat", GIT_ATTR_NOSYSTEM="1")
    return env


@dataclass(frozen=True)
class Output:
    text: str
    cut: bool
    """More output followed than was read (OUTPUT_LIMIT)."""


async def run_git(workspace: Path, *args: str, extra: tuple[str, ...] = ()) -> Output | None:
    """`git <args>` in `workspace`, safely (see the module's docstring); None when it fails.

    It runs in a worker thread: starting a process blocks its thread for a while on a loaded
    machine, and the event loop must stay free to end the briefing's wait on time. A call
    cancelled then is left to finish in its thread, which kills git at TIMEOUT."""
    command = ("git", *SAFE, *extra, "-C", str(workspace), *args)
    return await anyio.to_thread.run_sync(_run, command, git_env(), abandon_on_cancel=True)


def _run(command: tuple[str, ...], env: dict[str, str]) -> Output | None:
    try:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    except OSError:  # no git on PATH
        return None
    try:
        out, _ = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        return None
    if process.returncode != 0:
        return None
    return Output(out[:OUTPUT_LIMIT].decode("utf-8", "replace"), len(out) > OUTPUT_LIMIT)


@dataclass(frozen=True)
class Repo:
    root: str
    branch: str
    """The checked-out branch, or `detached at <commit>`."""


async def repo(workspace: Path) -> Repo | None:
    """The repository the workspace is in, and its branch; None: it is in none."""
    top = await run_git(workspace, "rev-parse", "--show-toplevel")
    if top is None or not top.text.strip():
        return None
    branch = await run_git(workspace, "symbolic-ref", "-q", "--short", "HEAD")
    if branch is not None and branch.text.strip():
        return Repo(top.text.strip(), branch.text.strip())
    head = await run_git(workspace, "rev-parse", "--short", "HEAD")
    return Repo(top.text.strip(), f"detached at {head.text.strip()}" if head else "no commits yet")


async def main_branch(workspace: Path) -> str | None:
    """`origin`'s default branch, else a local `main`, `master` or `trunk`; None: none."""
    found = await run_git(workspace, "for-each-ref", "--format=%(refname)\t%(symref)",
                          "refs/remotes/origin/HEAD", "refs/heads/main", "refs/heads/master",
                          "refs/heads/trunk")
    if found is None:
        return None
    refs = dict(line.split("\t", 1) for line in found.text.splitlines() if "\t" in line)
    target = refs.get("refs/remotes/origin/HEAD", "")
    if target.startswith("refs/remotes/origin/"):
        return target.removeprefix("refs/remotes/origin/")
    for name in ("main", "master", "trunk"):
        if f"refs/heads/{name}" in refs:
            return name
    return None


async def filters_off(workspace: Path) -> tuple[str, ...]:
    """`-c` options that empty every filter driver the repository's own config defines."""
    listed = await run_git(workspace, "config", "--list", "--show-scope", "--name-only", "-z")
    if listed is None:
        return ()
    fields = listed.text.split("\0")
    drivers = {m.group(1) for scope, name in zip(fields[::2], fields[1::2])
               if scope in UNTRUSTED_SCOPES and (m := FILTER_KEY.fullmatch(name))}
    return tuple(arg for d in sorted(drivers)
                 for kind in ("clean", "smudge", "process") for arg in ("-c", f"filter.{d}.{kind}="))


@dataclass(frozen=True)
class Status:
    lines: tuple[str, ...]
    more: int | None
    """Lines left out past STATUS_LINES; None: an unknown number (the output was cut)."""


async def status(workspace: Path) -> Status | None:
    """`git status --short`, at most STATUS_LINES lines."""
    extra = await filters_off(workspace)
    out = await run_git(workspace, "status", "--porcelain=v1", "--ignore-submodules=all",
                        "--untracked-files=normal", extra=extra)
    if out is None:
        return None
    lines = out.text.splitlines()
    if out.cut:
        return Status(tuple(lines[:STATUS_LINES]), None)
    return Status(tuple(lines[:STATUS_LINES]), len(lines) - min(len(lines), STATUS_LINES))


async def commits(workspace: Path) -> tuple[str, ...] | None:
    """The last LOG_COUNT commits, one line each; None: none yet (or no repository)."""
    out = await run_git(workspace, "log", f"-n{LOG_COUNT}", "--no-show-signature",
                        "--no-ext-diff", "--date=short", "--format=%h %s (%an, %ad)")
    if out is None or not out.text.strip():
        return None
    return tuple(line if len(line) <= LINE_LIMIT else line[:LINE_LIMIT - 1] + "…"
                 for line in out.text.splitlines())
