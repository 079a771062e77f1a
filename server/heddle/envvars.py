"""Numbers from environment variables, with an error that names the variable."""

from __future__ import annotations

from typing import Mapping


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
