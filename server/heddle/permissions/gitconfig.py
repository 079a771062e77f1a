"""Whether a repository's own git configuration can make a reading git command run a program.

Plan mode lets `git status`, `git log` and the like run unasked; but a repository's
`.git/config` is workspace content, and some of its keys name programs that those commands
run (`core.fsmonitor` at every `git status`, a diff driver's `textconv` at `git log -p`, a
`filter.*.clean` when the index is refreshed, `include.path` pulling in another file of keys).
With any of them, or a `post-index-change` hook, git is not run unasked.
"""

from __future__ import annotations

import re
from pathlib import Path

from heddle.regular import read_regular

CONFIG_LIMIT = 1 << 20
RUNS_PROGRAMS = re.compile(
    r"core\.(fsmonitor|pager|hookspath|sshcommand|askpass|editor|alternaterefscommand|gitproxy)"
    r"|diff\.external|diff\..+\.(textconv|command)|filter\..+\.(clean|smudge|process)"
    r"|merge\..+\.driver|include\.path|includeif\..+\.path|pager\..+|gpg\.(.+\.)?program"
    r"|credential\.(.+\.)?helper|sequence\.editor|interactive\.difffilter"
    r"|uploadpack\.packobjectshook|core\.fsmonitorhookversion")
"""Keys (lower case, `section.subsection.name`) whose value git may run as a program."""
HOOKS = ("post-index-change",)
"""Hooks a reading command may run (a refreshed index is written back)."""


def git_dir(start: Path) -> Path | None:
    """The git folder of the repository `start` is in (a `.git` folder, or the one a `.git`
    file points to), or None."""
    for folder in (start, *start.parents):
        dot = folder / ".git"
        if dot.is_dir():
            return dot
        if dot.is_file():
            try:
                line = read_regular(dot, 4096).decode("utf-8", "replace").strip()
            except OSError:
                return None
            if line.startswith("gitdir:"):
                target = Path(line[len("gitdir:"):].strip())
                return target if target.is_absolute() else folder / target
            return None
    return None


def keys(text: str) -> list[str]:
    """The keys a git config file sets, as `section[.subsection].name`, lower case (the
    subsection as written)."""
    found: list[str] = []
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            head = line[1:line.find("]")] if "]" in line else line[1:]
            name, _, sub = head.partition(" ")
            sub = sub.strip().strip('"')
            section = name.lower() + (f".{sub}" if sub else "")
            if "." in name:  # [section.sub], the old form
                section = name.lower()
            rest = line[line.find("]") + 1:].strip() if "]" in line else ""
            if rest and rest[0] not in "#;":
                found.append(f"{section}.{_name(rest)}")
            continue
        found.append(f"{section}.{_name(line)}")
    return found


def _name(line: str) -> str:
    return re.split(r"[\s=]", line, maxsplit=1)[0].lower()


def runs_programs(workspace: Path) -> str | None:
    """Why git in `workspace`'s repository could run a program the repository names; None:
    its config and hooks name none (or it is in no repository)."""
    folder = git_dir(workspace)
    if folder is None:
        return None
    for name in ("config", "config.worktree"):
        try:
            text = read_regular(folder / name, CONFIG_LIMIT).decode("utf-8", "replace")
        except FileNotFoundError:
            continue
        except OSError as exc:
            return f"its {name} cannot be read ({exc})"
        for key in keys(text):
            if RUNS_PROGRAMS.fullmatch(key):
                return f"the repository's .git/{name} sets {key}, which makes git run a program"
    for hook in HOOKS:
        if (folder / "hooks" / hook).exists():
            return f"the repository has a {hook} hook, which git runs"
    return None
