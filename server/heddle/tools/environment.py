"""The environment tool processes (Bash, hooks) start with: the daemon's, minus its secrets."""

from __future__ import annotations

import os
from typing import Iterable, Mapping

SECRET_MARKERS = ("API_KEY", "APIKEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")


def is_secret(name: str) -> bool:
    return any(marker in name.upper() for marker in SECRET_MARKERS)


def tool_env(environ: Mapping[str, str] | None = None, pass_env: Iterable[str] = ()) -> dict[str, str]:
    """`environ` (default: this process's) without variables that look like secrets, except
    those named in `pass_env` (the `tools.pass_env` setting)."""
    environ = os.environ if environ is None else environ
    allowed = set(pass_env)
    return {k: v for k, v in environ.items() if k in allowed or not is_secret(k)}
