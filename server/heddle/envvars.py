"""Numbers, the log level and URLs from environment variables, with an error that names the
variable; and whether the environment names a model endpoint at all."""

from __future__ import annotations

from typing import Mapping
from urllib.parse import urlsplit


def number(env: Mapping[str, str], name: str, default: float, *, whole: bool = False,
           minimum: float = 0) -> float:
    """`env[name]` as a number (`default` when unset or empty); ValueError names the variable."""
    raw = (env.get(name) or "").strip()
    if not raw:
        return default
    kind = "a whole number" if whole else "a number"
    try:
        value: float = int(raw) if whole else float(raw)
    except ValueError:
        raise ValueError(f"{name} must be {kind}, not {raw!r}") from None
    if not value >= minimum:  # also refuses nan
        raise ValueError(f"{name} must be {kind} of at least {minimum:g}, not {raw!r}")
    return value


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def log_level(env: Mapping[str, str], name: str = "HEDDLE_LOG_LEVEL", default: str = "INFO"
              ) -> str:
    """`env[name]` as a logging level name, in any case (`default` when unset or empty);
    ValueError names the variable and the levels there are."""
    raw = (env.get(name) or "").strip()
    if not raw:
        return default
    if raw.upper() not in LOG_LEVELS:
        raise ValueError(f"{name} must be one of {', '.join(LOG_LEVELS)}, not {raw!r}")
    return raw.upper()


def http_url(env: Mapping[str, str], name: str) -> str | None:
    """`env[name]` as an http(s) URL with a host (None when unset or empty); ValueError names
    the variable, so that a typo is one clear error at start-up rather than every model call
    failing as a lost connection."""
    raw = (env.get(name) or "").strip()
    if not raw:
        return None
    try:
        parts = urlsplit(raw)
        ok = parts.scheme.lower() in ("http", "https") and bool(parts.hostname)
        parts.port  # ValueError for a port that is no number or out of range
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"{name} is not an http(s) URL: {raw!r}")
    return raw


NO_ENDPOINT = ("ANTHROPIC_API_KEY is not set: set it to your Anthropic API key, or set "
               "ANTHROPIC_BASE_URL to an Anthropic-compatible endpoint (one that checks no key "
               "needs none)")


def no_model_endpoint(env: Mapping[str, str]) -> str | None:
    """Why no model call can be made with this environment (neither a key for Anthropic's API
    nor another endpoint), or None. The daemon's model client says it at a turn; `heddle ask`
    says it before it starts a daemon, so that no session is made for a turn that cannot run."""
    if env.get("ANTHROPIC_API_KEY") or (env.get("ANTHROPIC_BASE_URL") or "").strip():
        return None
    return NO_ENDPOINT
