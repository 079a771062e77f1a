"""The environment tool processes (Bash, hooks) start with: the daemon's, minus its secrets and
its model endpoint's settings."""

from __future__ import annotations

from typing import Iterable, Mapping

from heddle import secret_env
from heddle.secret_env import MODEL_SECRETS, SECRET_MARKERS, is_secret

__all__ = ["SECRET_MARKERS", "is_secret", "tool_env"]


def tool_env(environ: Mapping[str, str] | None = None, pass_env: Iterable[str] = ()) -> dict[str, str]:
    """`environ` (default: this process's as it was started, secrets included) without
    variables that look like secrets and without `ANTHROPIC_*` (the daemon's model endpoint is
    not the tools'), except those named in `pass_env` (the `tools.pass_env` setting). The model
    credentials (`MODEL_SECRETS`) are never passed on, whatever `pass_env` says."""
    environ = secret_env.environ() if environ is None else environ
    allowed = set(pass_env).difference(MODEL_SECRETS)
    return {k: v for k, v in environ.items()
            if k in allowed or not (is_secret(k) or k.startswith("ANTHROPIC_"))}
