"""Changing an idle session's permission mode and model from the editor (`session/configure`).

The change is the user's own choice, so it may widen the mode, and it never comes from the
settings files. It is refused while a turn runs: the running turn keeps the mode and model it
started with, and the editor can say so instead of leaving the user to guess when it applies.
The transcript records it, so a later `session/load` continues with the new mode and model.
"""

from __future__ import annotations

from heddle.permissions.policy import Mode
from heddle.sessions.session import Session, SessionError


def configure(session: Session, mode: Mode | None, model: str | None) -> None:
    """Set the session's mode and/or model for its next turns; SessionError `busy` while a
    turn runs (or a prompt waits for one)."""
    session.expect_open()
    if session.turn is not None or session.queue:
        running = session.turn.id if session.turn is not None else "a queued prompt"
        raise SessionError("busy", f"session {session.id} is running turn {running}; change "
                           "the mode or model when the turn has ended")
    if mode is not None:
        session.policy.mode = mode
    if model is not None and model != session.model:
        session.model = model
        session.compactor = None  # it calls the old model; the next turn makes a new one
    if session.transcript is not None and (mode is not None or model is not None):
        session.transcript.configured(mode, model)
