"""Heddle's own files: what an agent must never change without the user's yes for that call.

Writing Heddle's settings, rules, trust record or the scripts its hooks run is how an agent
would raise its own permissions (a permissive mode, an allow rule, a hook that runs a command).
So a call that writes one always asks, in every mode but bypassPermissions, and no allow rule,
hook or "allow always" can approve it in advance. Protected:

- any folder named `.heddle` (compared case-insensitively, since some file systems are), so
  every project's settings, at any depth;
- the user's config folder, `$XDG_CONFIG_HOME/heddle` and `~/.config/heddle` (settings, trust);
- the editor settings the VS Code extension reads Heddle's settings from (`.vscode/settings.json`,
  `*.code-workspace`: the daemon command, its environment, the permission mode);
- where those folders really are, when they are symlinks;
- the files named in the session's hook commands (`./scripts/check.sh`).

Paths are compared after the tools resolved them (`..` and symlinks gone). A shell command is
opaque, so Bash gets a tripwire instead: a command that mentions `heddle` (its folders, the
`heddle trust` command, `HEDDLE_` variables), `XDG_CONFIG_HOME`, `.vscode`, `.code-workspace`,
a protected folder's real path or a hook script's name asks. A command can still write these files without naming them.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from heddle.settings import HookSettings, SettingsFiles
from heddle.xdg import config_dir

HEDDLE_DIR = ".heddle"
NOTE = "it changes Heddle's own settings, so it always asks"


@dataclass(frozen=True)
class Protected:
    roots: tuple[str, ...]
    """Casefolded absolute paths (folders and files), as written and as resolved."""
    words: tuple[str, ...]
    """Casefolded text whose mention makes a shell command ask."""

    def covers(self, path: Path) -> bool:
        text = str(path).casefold()
        parts = text.split("/")
        if HEDDLE_DIR in parts or parts[-2:] == [".vscode", "settings.json"] \
                or parts[-1].endswith(".code-workspace"):
            return True
        return any(text == root or text.startswith(root + "/") for root in self.roots)

    def mentioned_in(self, command: str) -> bool:
        text = command.casefold()
        return any(word in text for word in self.words)


def protected(workspace: Path, files: SettingsFiles | None, hooks: HookSettings) -> Protected:
    # config_dir({}): the default one (~/.config/heddle), whatever XDG_CONFIG_HOME says
    folders = [workspace / HEDDLE_DIR, config_dir(), config_dir({})]
    if files is not None:
        folders.append(files.user.parent)
    scripts = hook_scripts(hooks, workspace)
    roots = {form for path in folders + scripts for form in _forms(path)}
    words = {"heddle", "xdg_config_home", ".vscode", ".code-workspace"}
    words |= {os.path.realpath(p).casefold() for p in folders}
    inside = str(workspace.resolve()).casefold() + "/"
    # a script elsewhere (`/usr/bin/python3`) is out of the tools' reach; naming it is no sign
    words |= {p.name.casefold() for p in scripts if os.path.realpath(p).casefold().startswith(inside)}
    return Protected(tuple(sorted(roots)), tuple(sorted(w for w in words if w)))


def _forms(path: Path) -> tuple[str, str]:
    return os.path.normpath(str(path)).casefold(), os.path.realpath(path).casefold()


def hook_scripts(hooks: HookSettings, workspace: Path) -> list[Path]:
    """Files a hook command names: words with a `/`, or that are files in the workspace."""
    found: list[Path] = []
    for hook in hooks.pre_tool_use + hooks.post_tool_use + hooks.stop:
        try:
            words = shlex.split(hook.command)
        except ValueError:
            words = hook.command.split()
        for word in words:
            for name in ("${HEDDLE_PROJECT_DIR}", "$HEDDLE_PROJECT_DIR"):
                word = word.replace(name, str(workspace))
            if not word or word.startswith("-"):
                continue
            path = Path(os.path.expanduser(word))
            path = path if path.is_absolute() else workspace / path
            if ("/" in word or path.is_file()) and not path.is_dir():
                found.append(path)
    return found
