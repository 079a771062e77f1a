"""Trusting a workspace's project settings: review what they would enable, record the trust,
and keep it when Heddle itself saves a rule the user chose into a trusted file.

How trust gates the settings is in `heddle.settings` (`load_settings`); where it is recorded,
in `heddle.trust_store`.
"""

from __future__ import annotations

import logging
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from heddle import trust_store
from heddle.permissions.store import Saved
from heddle.settings import (SettingsFiles, parse_settings, project_settings_path, read_bytes,
                             read_file, user_settings_path, widening)

log = logging.getLogger(__name__)


class TrustMismatch(Exception):
    """The project settings file is not the content the caller asked to trust."""


@dataclass(frozen=True)
class ProjectTrust:
    file: Path
    sha256: str | None
    """Of the file's content; None: there is no project settings file."""
    enables: list[str]
    """What trusting it applies (beyond what applies anyway); empty: nothing needs trust."""
    trusted: bool
    """This content is trusted (or needs no trust)."""


def review_project(workspace: Path, environ: Mapping[str, str] | None = None) -> ProjectTrust:
    """What the project settings of `workspace` would enable, and whether they are trusted."""
    files = SettingsFiles(user_settings_path(environ), project_settings_path(workspace))
    return _review(files, workspace, read_bytes(project_settings_path(workspace), []))


def _review(files: SettingsFiles, workspace: Path, data: bytes | None) -> ProjectTrust:
    assert files.project is not None
    if data is None:
        return ProjectTrust(files.project, None, [], True)
    sha = trust_store.digest(data)
    enables = widening(parse_settings(data, files.project, []), read_file(files.user, []))
    return ProjectTrust(files.project, sha, enables,
                        not enables or trust_store.trusted_digest(files.trust, workspace) == sha)


def trust_project(workspace: Path, sha256: str | None = None,
                  environ: Mapping[str, str] | None = None) -> ProjectTrust:
    """Trust the project settings of `workspace` as they are now (TrustMismatch if `sha256` is
    given and the content differs; TrustWriteError if the record cannot be written)."""
    files = SettingsFiles(user_settings_path(environ), project_settings_path(workspace))
    data = read_bytes(project_settings_path(workspace), [])
    review = _review(files, workspace, data)
    if sha256 is not None and sha256 != review.sha256:
        raise TrustMismatch(f"{review.file} is not the content asked to be trusted: its SHA-256 "
                            f"is {review.sha256 or '(no file)'}, not {sha256}; review it again")
    if review.sha256 is not None:
        trust_store.record(files.trust, workspace, review.sha256)
    return ProjectTrust(review.file, review.sha256, review.enables, True)


def rewrite_project(files: SettingsFiles, write: Callable[[], Saved | None]) -> Saved | None:
    """Run `write`, which changes a rule in the project settings file on the user's word, and
    keep the file trusted if all of it applied before: trust goes to the content written, if
    it was made from the settings that were trusted. A change someone else made meanwhile,
    before the write or after it, is not trusted with it."""
    if files.project is None:
        return write()
    workspace = files.project.parent.parent
    data = read_bytes(files.project, [])
    before = _review(files, workspace, data)
    saved = write()
    if saved is not None and before.trusted and _settings(data) == saved.edited:
        try:
            trust_store.record(files.trust, workspace, trust_store.digest(saved.written))
        except trust_store.TrustWriteError as exc:  # the rule is saved; the next session warns
            log.warning("%s stays untrusted: %s", files.project, exc)
    return saved


def _settings(data: bytes | None) -> dict[str, Any] | None:
    """The TOML data of a settings file's content (none: {}); None if it is not TOML."""
    try:
        return {} if data is None else tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
