"""The record of workspace trust: which project settings files the user has confirmed, by content.

A project's `.heddle/settings.toml` comes with the folder, so whoever wrote the folder (or an
agent working in it) wrote the file. What in it widens permissions — allow rules, a more
permissive mode, hooks, secrets passed to tools — applies only once the user has trusted that
exact content. The record lives in the user's config folder (which the agent may never write
without asking) and maps each workspace to the SHA-256 of the settings file it trusted, so a
changed file needs trust again.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

from heddle.atomic import write_atomic
from heddle.private import make_dirs
from heddle.regular import read_regular

log = logging.getLogger(__name__)

TRUST_FILE = "trusted-workspaces.json"
VERSION = 1
READ_LIMIT = 16 << 20
"""Largest trust record read (bytes): a pipe, a device or a huge file there trusts nothing."""


class TrustWriteError(Exception):
    """The trust record could not be written; the message says why."""


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _key(workspace: Path) -> str:
    return os.path.realpath(workspace)


def _load(store: Path) -> dict[str, Any]:
    try:
        data = json.loads(read_regular(store, READ_LIMIT).decode("utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        log.warning("cannot read %s (%s): no workspace is trusted", store, exc)
        return {}
    workspaces = data.get("workspaces") if isinstance(data, dict) else None
    return workspaces if isinstance(workspaces, dict) else {}


def trusted_digest(store: Path, workspace: Path) -> str | None:
    """The SHA-256 of the project settings the user trusted for `workspace`, if any."""
    entry = _load(store).get(_key(workspace))
    value = entry.get("sha256") if isinstance(entry, dict) else None
    return value if isinstance(value, str) else None


def record(store: Path, workspace: Path, sha256: str) -> None:
    """Trust `workspace`'s project settings whose content has this SHA-256 (replacing what was
    trusted before)."""
    workspaces = _load(store)
    workspaces[_key(workspace)] = {
        "sha256": sha256,
        "trustedAt": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    _save(store, workspaces)


def forget(store: Path, workspace: Path) -> bool:
    """Stop trusting `workspace`'s project settings; False if they were not trusted."""
    workspaces = _load(store)
    if workspaces.pop(_key(workspace), None) is None:
        return False
    _save(store, workspaces)
    return True


def _save(store: Path, workspaces: dict[str, Any]) -> None:
    text = json.dumps({"version": VERSION, "workspaces": workspaces}, indent=2, sort_keys=True)
    try:
        make_dirs(store.parent)  # (missing folders 0700; the user's config folder as it is)
        write_atomic(store, text + "\n", follow_symlinks=True, own=True)
    except OSError as exc:
        raise TrustWriteError(f"cannot write {store}: {exc.strerror or exc}") from None
