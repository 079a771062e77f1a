"""Heddle's folders in the user's home, after the XDG base directory variables, on every OS.

`$XDG_CONFIG_HOME/heddle` (default `~/.config/heddle`) holds settings and the trust record;
`$XDG_STATE_HOME/heddle` (default `~/.local/state/heddle`) the log, transcripts and saved tool
results. The docs promise these paths on macOS too, where platformdirs would pick
`~/Library/Application Support` when the variables are unset, and the daemon reads them from
the environment it was given, which platformdirs cannot take; so the rule is kept here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def config_dir(environ: Mapping[str, str] | None = None) -> Path:
    """`$XDG_CONFIG_HOME/heddle`, else `~/.config/heddle` (`environ`: default this process's)."""
    return _heddle_dir(environ, "XDG_CONFIG_HOME", ".config")


def state_dir(environ: Mapping[str, str] | None = None) -> Path:
    """`$XDG_STATE_HOME/heddle`, else `~/.local/state/heddle`."""
    return _heddle_dir(environ, "XDG_STATE_HOME", os.path.join(".local", "state"))


def _heddle_dir(environ: Mapping[str, str] | None, variable: str, default: str) -> Path:
    environ = os.environ if environ is None else environ
    base = environ.get(variable) or os.path.join(os.path.expanduser("~"), default)
    return Path(base) / "heddle"
