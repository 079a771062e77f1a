"""Keeping the state directory from growing forever: saved tool results expire.

An over-long tool result is saved in full under `tool-results/<session>/` so the model can page
through it (see docs/context.md). Those files matter while the session is worked on; a session
whose saved results have not changed for `days` days gets them removed when a daemon starts.
Transcripts are never removed here: they are the sessions themselves.
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path

from heddle.ids import is_session_id

log = logging.getLogger(__name__)

DEFAULT_DAYS = 14


def tool_results_dir(sessions: Path) -> Path:
    return sessions.parent / "tool-results"


def session_results_dir(sessions: Path, session_id: str) -> Path | None:
    """Where session `session_id`'s over-long tool results are saved; None (they are not) for
    an id of another shape than Heddle's, which could name a folder anywhere."""
    if not is_session_id(session_id):
        log.error("not saving tool results of session %r: not a Heddle session id", session_id)
        return None
    return tool_results_dir(sessions) / session_id


def prune_tool_results(root: Path, days: float, now: float | None = None) -> int:
    """Remove each `root/<session>/` whose newest file is older than `days`; how many went.

    Never raises: a directory that cannot be read or removed is logged and kept.
    """
    if days <= 0 or not root.is_dir():
        return 0
    cutoff = (time.time() if now is None else now) - days * 86400
    removed = 0
    for session in root.iterdir():
        try:
            if not session.is_dir() or session.is_symlink():
                continue
            newest = max((p.stat().st_mtime for p in session.rglob("*")),
                         default=session.stat().st_mtime)
            if newest >= cutoff:
                continue
            shutil.rmtree(session)
            removed += 1
        except OSError as exc:
            log.warning("cannot prune saved tool results in %s: %s", session, exc)
    if removed:
        log.info("removed the saved tool results of %d idle session(s) from %s", removed, root)
    return removed
