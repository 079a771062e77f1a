"""Ids that become part of a file's path, checked before any path is built from them.

A session id names its transcript (`sessions/<id>.jsonl`) and its saved tool results
(`tool-results/<id>/`). Heddle makes them (`uuid4().hex`: 32 lowercase hex digits), so an id of
any other shape, from a client or from a transcript's header, names no session: `../../..`
would name a folder far outside the state folder.

A tool_use id names the file an over-long tool result is saved in. It comes from the model
endpoint, which may send anything: the API's ids are letters, digits, `_` and `-`; one of
another shape (`../../x`, an absolute path, a NUL, ten thousand characters) is not refused (the
call is the model's, and the result still matters) but saved under a name derived from it.
"""

from __future__ import annotations

import hashlib
import re

SESSION_ID = re.compile(r"[0-9a-f]{32}")
_PLAIN = re.compile(r"[A-Za-z0-9_-]{1,128}")


def is_session_id(value: object) -> bool:
    """Whether `value` has the shape of the session ids Heddle makes."""
    return isinstance(value, str) and SESSION_ID.fullmatch(value) is not None


def session_id_problem(value: str) -> str:
    """Why `value` is no session id, for an error message."""
    shown = value if len(value) <= 80 else value[:77] + "..."
    return (f"{shown!r} is not a Heddle session id (32 lowercase hex digits, as session/new "
            "and session/list give them)")


def file_stem(tool_use_id: str) -> str:
    """A file name (without extension) for `tool_use_id` that stays in its folder: the id
    itself when it is 1 to 128 letters, digits, `_` and `-` (as the API's are), else `h.` and
    its SHA-256 (the dot keeps it apart from every id used as it is)."""
    if _PLAIN.fullmatch(tool_use_id):
        return tool_use_id
    return "h." + hashlib.sha256(tool_use_id.encode("utf-8", "surrogatepass")).hexdigest()
