"""The environment block: where the agent works, told once in a session's first user message.

It stays out of the system prompt, which must be the same bytes for the whole session (the
prompt cache reads it first); the first message is cached as well, with the conversation. A
later turn adds a short update only when something the block said has changed (the date, the
model). The conversation itself records what was said: a loaded session finds its block there
and does not get another; one whose block was compacted away gets it again.
"""

from __future__ import annotations

import os
import platform
import re
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Iterable

from heddle.briefing import git
from heddle.briefing.gather import BOUND, gather

OPEN, CLOSE = "<environment>", "</environment>"
UPDATE_OPEN, UPDATE_CLOSE = "<environment-update>", "</environment-update>"
DATE_LINE = re.compile(r"^Today's date: (\S+)", re.MULTILINE)
MODEL_LINE = re.compile(r"^Model: (\S+)", re.MULTILINE)
GIT_PARTS = {"repo": "the repository and branch", "main": "the main branch",
             "status": "git status", "commits": "the recent commits"}


@dataclass(frozen=True)
class Environment:
    workspace: str
    platform: str
    shell: str
    today: str
    """ISO date (`2026-12-02`)."""
    model: str
    cutoff: str | None
    repo: git.Repo | None = None
    main_branch: str | None = None
    status: git.Status | None = None
    commits: tuple[str, ...] | None = None
    left_out: tuple[str, ...] = ()
    """What was not ready in time (GIT_PARTS' words)."""
    bound: float = BOUND
    """The time it had (seconds)."""


def model_line(model: str, cutoff: str | None) -> str:
    known = f"reliable knowledge up to {cutoff}" if cutoff else "knowledge cutoff not recorded"
    return f"Model: {model} ({known})"


def _platform() -> str:
    return f"{platform.system()} {platform.release()} ({platform.machine()})"


async def environment(workspace: Path, model: str, cutoff: str | None, today: date,
                      bound: float = BOUND) -> Environment:
    """The environment of a session now; git facts that take longer than `bound` are left
    out (and named)."""
    got = await gather({name: _bind(getattr(git, fn), workspace) for name, fn in
                        (("repo", "repo"), ("main", "main_branch"), ("status", "status"),
                         ("commits", "commits"))}, bound)
    repo = got.values.get("repo")
    in_repo = repo is not None or "repo" in got.late
    return Environment(
        str(workspace), _platform(), os.environ.get("SHELL") or "/bin/sh", today.isoformat(),
        model, cutoff, repo, got.values.get("main") if in_repo else None,
        got.values.get("status") if in_repo else None,
        got.values.get("commits") if in_repo else None,
        tuple(GIT_PARTS[n] for n in got.late) if in_repo else (), bound)


def _bind(fn, workspace: Path):
    return lambda: fn(workspace)


def render(env: Environment) -> str:
    lines = [OPEN, "Facts about where you are working, gathered when this session started.",
             f"Workspace: {env.workspace} (relative paths in tool inputs are resolved "
             "against it)",
             f"Platform: {env.platform}", f"Shell: {env.shell}", f"Today's date: {env.today}",
             model_line(env.model, env.cutoff)]
    lines += _git_lines(env)
    if env.left_out:
        lines.append(f"Not ready within {round(env.bound * 1000)} ms, so left out: "
                     f"{', '.join(env.left_out)} (run git yourself if you need it).")
    return "\n".join(lines + [CLOSE])


def _git_lines(env: Environment) -> list[str]:
    if env.repo is None:
        if "the repository and branch" in env.left_out:
            return ["Git repository: not known (git did not answer in time)."]
        return ["Git repository: no."]
    lines = [f"Git repository: yes, root {env.repo.root}",
             f"Current branch: {env.repo.branch}"]
    if env.main_branch:
        lines.append(f"Main branch (usually the base of pull requests): {env.main_branch}")
    if env.status is not None:
        if not env.status.lines:
            lines.append("Status: clean (no changes, no untracked files).")
        else:
            more = ("" if env.status.more == 0 else " (more lines left out)"
                    if env.status.more is None else f" ({env.status.more} more left out)")
            lines.append(f"Status (git status --short, at the start of the session){more}:")
            lines += [f"  {line}" for line in env.status.lines]
    if env.commits:
        lines.append("Recent commits:")
        lines += [f"  {line}" for line in env.commits]
    return lines


def said(texts: Iterable[str]) -> tuple[str | None, str | None] | None:
    """(date, model) as the conversation's last environment block or update gave them; None
    when the conversation holds no block (a new session, or one compacted since)."""
    found, day, model = False, None, None
    for text in texts:
        if text.startswith(OPEN):
            found, day, model = True, None, None
        elif not text.startswith(UPDATE_OPEN):
            continue
        if m := DATE_LINE.search(text):
            day = m.group(1)
        if m := MODEL_LINE.search(text):
            model = m.group(1)
    return (day, model) if found else None


def update(previous: tuple[str | None, str | None], today: str, model: str,
           cutoff: str | None) -> str | None:
    """The note for a later turn: what changed since the conversation was told (None:
    nothing)."""
    day, old_model = previous
    lines = []
    if day != today:
        lines.append(f"Today's date: {today}")
    if old_model != model:
        lines.append(model_line(model, cutoff) + " (the session's model was changed)")
    if not lines:
        return None
    return "\n".join([UPDATE_OPEN, "Changed since the environment above was given:", *lines,
                      UPDATE_CLOSE])
