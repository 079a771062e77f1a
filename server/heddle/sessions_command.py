"""`heddle sessions`: a workspace's sessions (or every one), newest first, one line each; and
the session a prefix of an id names, for `heddle ask -s`.

Both ask a daemon (`session/list`), so there is one reading of the transcripts: the daemon's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from heddle import secret_env, spawn
from heddle.client import Connection, RpcError
from heddle.terminal import Stdout, clean

SHORT_ID = 8
"""Characters of an id shown: `heddle ask -s` takes any prefix that names one session."""
STDOUT_GONE = 141
"""As `heddle ask`: nobody read the list to its end (a closed pipe), 128 + SIGPIPE."""
LATEST = 5
"""Sessions of the workspace shown when `-s` names none."""

DESCRIPTION = """\
List the sessions of a workspace (default: the current folder), newest first: the id (the
start of it that `heddle ask -s` takes), when the session was last active, its turns, its
model and its title (the first prompt). The daemon reads them from the transcripts in
$XDG_STATE_HOME/heddle/sessions/.
"""
EPILOG = ("Exit status: 0 listed (none, too), 2 a wrong command line (a workspace that is not a "
          "folder), 141 stdout was closed before the end, 1 anything else.\n")


class WrongSession(Exception):
    """A session id or prefix that names no session, or several."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    where = p.add_mutually_exclusive_group()
    where.add_argument("-w", "--workspace", default=".",
                       help="workspace folder (default: the current one)")
    where.add_argument("--all", action="store_true", help="the sessions of every workspace")
    p.add_argument("--json", action="store_true",
                   help="print the daemon's session/list entries as one JSON array")


def shown_path(path: str) -> str:
    """A path as the user typed it, its bytes that are not UTF-8 as `\\xff`."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def wrong_workspace(workspace: str) -> str | None:
    """Why `workspace` (resolved) cannot be sent to the daemon as one, if it cannot."""
    try:
        workspace.encode("utf-8")  # JSON-RPC carries text; the OS hands over surrogates
    except UnicodeEncodeError:
        return (f"heddle: the workspace path {shown_path(workspace)} is not valid UTF-8, so it "
                "cannot be sent to the daemon")
    if not Path(workspace).is_dir():  # as `heddle trust -w` says it
        return f"heddle: {workspace} is not a folder"
    return None


def lines(sessions: list[dict[str, Any]], workspaces: bool = False,
          id_chars: int = SHORT_ID) -> list[str]:
    """A heading and one line per session, columns aligned; the title last, on one line."""
    rows = [("ID", "LAST ACTIVE", "TURNS", "MODEL", *(("WORKSPACE",) if workspaces else ()),
             "TITLE")]
    for s in sessions:
        rows.append((s["sessionId"][:id_chars], _when(s["updatedAt"]), str(s["turns"]),
                     clean(s["model"], one_line=True),
                     *((clean(s["workspace"], one_line=True),) if workspaces else ()),
                     clean(s["title"], one_line=True) or "(no prompt yet)"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1]
            for row in rows]


def _when(iso: str) -> str:
    """An ISO 8601 time as local time, to the minute."""
    try:
        return datetime.fromisoformat(iso).astimezone().strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return clean(iso, one_line=True)


async def resolve(conn: Connection, given: str, workspace: str) -> str:
    """The id of the one session whose id starts with `given`; WrongSession says why there is
    none, with the candidates: the sessions it starts (their whole ids), or else the
    workspace's latest."""
    listed = (await conn.request("session/list", {}))["sessions"]
    found = [s for s in listed if s["sessionId"].startswith(given.lower())]
    if len(found) == 1:
        return found[0]["sessionId"]
    if found:
        said = [f"heddle: {len(found)} sessions have an id that starts with {given!r}; give "
                "more of it:", *lines(found, workspaces=True, id_chars=32)]
    elif latest := [s for s in listed if s["workspace"] == workspace][:LATEST]:
        said = [f"heddle: no session id starts with {given!r}; the latest sessions of "
                f"{workspace}:", *lines(latest)]
    else:
        said = [f"heddle: no session id starts with {given!r} (`heddle sessions --all` lists "
                "every session)"]
    raise WrongSession("\n  ".join(said))


async def _listed(workspace: str | None, env: dict[str, str]
                  ) -> tuple[int, list[dict[str, Any]]]:
    """(exit code, the sessions the daemon listed); what went wrong is said on stderr."""
    argv = spawn.command()
    try:
        daemon = await spawn.Daemon.start(argv, env)
    except OSError as exc:
        print(spawn.cannot_start(argv, exc), file=sys.stderr)
        return 1, []
    try:
        await daemon.initialize("heddle sessions")
        params = {} if workspace is None else {"workspace": workspace}
        return 0, (await daemon.conn.request("session/list", params))["sessions"]
    except RpcError as exc:
        print(daemon.refused(exc), file=sys.stderr)
        return 1, []
    except ConnectionError:
        for line in await daemon.lost():
            print(line, file=sys.stderr)
        return 1, []
    finally:
        await daemon.stop()


def run(args: argparse.Namespace, out: TextIO | None = None,
        env: dict[str, str] | None = None) -> int:
    out = out or sys.stdout
    workspace = None if args.all else str(Path(args.workspace).resolve())
    if workspace is not None and (wrong := wrong_workspace(workspace)):
        print(wrong, file=sys.stderr)
        return 2
    env = secret_env.environ() if env is None else env
    try:
        code, sessions = asyncio.run(_listed(workspace, env))
    except KeyboardInterrupt:
        return 130
    if code:
        return code
    if not sessions and not args.json:
        kept = "" if not env.get("HEDDLE_NO_TRANSCRIPTS") else \
            " (HEDDLE_NO_TRANSCRIPTS is set, so sessions are not kept)"
        print(f"heddle: no sessions{'' if workspace is None else ' in ' + workspace} yet{kept}",
              file=sys.stderr)
        return 0
    shown = Stdout(out)  # `heddle sessions | head -1` stops reading: no traceback then
    shown.write((json.dumps(sessions, indent=2, ensure_ascii=False) if args.json
                 else "\n".join(lines(sessions, workspaces=args.all))) + "\n")
    shown.flush()
    return STDOUT_GONE if shown.gone.is_set() else 0
