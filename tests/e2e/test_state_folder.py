"""The state folder against hostile ids and planted files, through the real daemon: ids are
checked before they make a path, the sessions folder tolerates anything in it, and what Heddle
writes there is readable by the user only (docs/security.md)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

import pytest

from e2e import lsp
from e2e.test_permissions import DONE, last_results
from e2e.test_turns import new_session

SID = "0123456789abcdef0123456789abcdef"


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def grep_with_id(call_id: str) -> dict:
    return {"type": "tool_use", "id": call_id, "name": "Grep", "input": {"pattern": "needle"}}


async def test_a_crafted_tool_use_id_saves_the_result_under_its_hash_in_the_sessions_folder(
        client, scripted, workspace, daemon_env, tmp_path):
    (workspace / "many.txt").write_text("".join(f"needle {i}\n" for i in range(6000)))
    outside = tmp_path / "outside"
    outside.mkdir()
    crafted = ["../../../../escaped", f"{outside}/absolute", "nul\u0000byte", "a" * 5000,
               "toolu_plain-1"]
    scripted.add_scenario("s", {"steps": [
        {"content": [grep_with_id(c) for c in crafted]}, DONE]})
    sid = await new_session(client, workspace, "s", permissionMode="plan")
    before = files_under(tmp_path)

    result = await client.call("turn/start", {"sessionId": sid, "prompt": "find"}, timeout=45)

    assert result["reason"] == "completed"
    saved = Path(daemon_env["XDG_STATE_HOME"]) / "heddle" / "tool-results" / sid
    names = ["h." + hashlib.sha256(c.encode()).hexdigest() + ".txt" for c in crafted[:4]]
    names.append("toolu_plain-1.txt")  # an id of the API's shape is the name itself
    for r, name in zip(last_results(scripted, "s"), names):
        assert not r["is_error"] and f"is saved in {saved / name};" in r["content"], r
        assert (saved / name).read_text().count("needle") == 6000
    written = files_under(tmp_path) - before  # nothing but the saved results, nowhere else
    assert sorted(p.name for p in written if p.parent == saved) == sorted(names)
    assert [p for p in written if p.parent != saved
            and p != Path(daemon_env["HEDDLE_LOG_FILE"])] == []
    assert list(outside.iterdir()) == []


def plant_transcript(sessions: Path, file_id: str, header_id: str, workspace: Path) -> Path:
    sessions.mkdir(parents=True, exist_ok=True)
    path = sessions / f"{file_id}.jsonl"
    path.write_text(json.dumps({"type": "header", "version": 1, "session_id": header_id,
                                "workspace": str(workspace), "model": "s",
                                "created_at": 1.0}) + "\n")
    return path


async def test_a_transcript_whose_header_names_another_session_is_refused(
        client, scripted, workspace, daemon_env, tmp_path):
    """A header's `../../..` would make the session's saved-results folder (which Read may
    read without asking) the folder above the state folder."""
    sessions = Path(daemon_env["XDG_STATE_HOME"]) / "heddle" / "sessions"
    plant_transcript(sessions, SID, "../../..", workspace)
    (tmp_path / "secret.txt").write_text("top secret\n")

    listed = await client.call("session/list", {})
    with pytest.raises(Exception) as err:
        await client.call("session/load", {"sessionId": SID})

    assert listed["sessions"] == []
    assert err.value.code == -32013
    assert "its header names the session '../../..'" in str(err.value)
    log = Path(daemon_env["HEDDLE_LOG_FILE"]).read_text()
    assert f"skipping {SID}.jsonl: {SID}.jsonl is not a Heddle transcript" in log


async def test_a_session_id_of_another_shape_is_invalid_params(client):
    for bad in ["../../..", "/etc/passwd", "a" * 5000, "x\u0000y", "", SID.upper()]:
        with pytest.raises(Exception) as err:
            await client.call("session/load", {"sessionId": bad})
        assert err.value.code == -32602, bad
        assert "is not a Heddle session id (32 lowercase hex digits" in str(err.value)
        assert "at `$.sessionId`" in str(err.value)
        assert len(str(err.value)) < 400


async def test_the_sessions_folder_tolerates_pipes_devices_links_and_huge_lines(
        client, scripted, workspace, daemon_env):
    scripted.add_scenario("s", {"steps": [DONE]})
    sid = await new_session(client, workspace, "s")
    await client.call("turn/start", {"sessionId": sid, "prompt": "hello"}, timeout=45)
    sessions = Path(daemon_env["XDG_STATE_HOME"]) / "heddle" / "sessions"
    pipe, zero, link, long, deep = ("%032x" % n for n in range(1, 6))
    os.mkfifo(sessions / f"{pipe}.jsonl")
    (sessions / f"{zero}.jsonl").symlink_to("/dev/zero")
    plant_transcript(sessions.parent / "elsewhere", link, link, workspace)
    (sessions / f"{link}.jsonl").symlink_to(sessions.parent / "elsewhere" / f"{link}.jsonl")
    (sessions / f"{long}.jsonl").write_bytes(b'{"type": "header", "x": "' + b"y" * (2 << 20))
    plant_transcript(sessions, deep, deep, workspace)
    with open(sessions / f"{deep}.jsonl", "ab") as f:
        f.write(b"[" * 100_000 + b"\n" + b'{"type": "turn", "turnId": "t", "prompt": "\xff"}\n')

    listed = await client.call("session/list", {}, timeout=20)

    ids = [s["sessionId"] for s in listed["sessions"]]
    assert sorted(ids) == sorted([sid, deep])  # damaged lines are skipped, as ever
    log = Path(daemon_env["HEDDLE_LOG_FILE"]).read_text()
    assert f"skipping {pipe}.jsonl: " in log and "is a named pipe, not a file" in log
    assert f"skipping {zero}.jsonl: " in log and f"skipping {link}.jsonl: " in log
    assert "is a symbolic link, not a file" in log
    assert f"skipping {long}.jsonl: {long}.jsonl is not a Heddle transcript (its first " \
           "line is longer than 1,048,576 bytes)" in log
    for bad, why in [(pipe, "is a named pipe"), (zero, "is a symbolic link"),
                     (link, "is a symbolic link"), (long, "its first line is longer")]:
        with pytest.raises(Exception) as err:
            await client.call("session/load", {"sessionId": bad}, timeout=20)
        assert err.value.code == -32013 and why in str(err.value), (bad, err.value)
    loaded = await client.call("session/load", {"sessionId": deep})
    assert loaded["sessionId"] == deep
    assert stat.S_ISFIFO(os.lstat(sessions / f"{pipe}.jsonl").st_mode)  # left as it was


@pytest.mark.timeout(120)  # two daemons, a turn, a trust, a load (each slow under load)
async def test_what_heddle_writes_is_readable_by_the_user_only(
        daemon_env, daemon_command, scripted, workspace, tmp_path):
    state = tmp_path / "state" / "heddle"
    old = plant_transcript(state / "sessions", SID, SID, workspace)  # from an older Heddle
    for folder in (state, state / "sessions"):
        folder.chmod(0o755)
    old.chmod(0o644)
    (state / "heddle.log").write_text("")
    (state / "heddle.log").chmod(0o644)
    elsewhere = tmp_path / "my.log"  # a log file the user named: theirs, left as it was
    elsewhere.write_text("")
    elsewhere.chmod(0o644)
    their_config = tmp_path / "their-config" / "heddle"  # the user's folder, left as it was
    their_config.mkdir(parents=True, mode=0o755)
    their_trust = their_config / "trusted-workspaces.json"  # Heddle's record: made 0600
    their_trust.write_text('{"version": 1, "workspaces": {}}\n')
    their_trust.chmod(0o644)
    (workspace / "many.txt").write_text("".join(f"needle {i}\n" for i in range(6000)))
    scripted.add_scenario("s", {"steps": [{"content": [grep_with_id("toolu_g")]}, DONE]})
    (workspace / ".heddle").mkdir()
    (workspace / ".heddle" / "settings.toml").write_text('[permissions]\nallow = ["Read"]\n')
    config = tmp_path / "config"
    default_log = {k: v for k, v in daemon_env.items() if k != "HEDDLE_LOG_FILE"}
    umask = os.umask(0o002)  # a permissive umask: the daemon's files must not follow it
    try:
        mine = await lsp.start(default_log, daemon_command)
        theirs = await lsp.start(dict(daemon_env, HEDDLE_LOG_FILE=str(elsewhere),
                                      XDG_CONFIG_HOME=str(their_config.parent)), daemon_command)
    finally:
        os.umask(umask)
    try:
        sid = await new_session(mine, workspace, "s")
        await mine.call("turn/start", {"sessionId": sid, "prompt": "find"}, timeout=45)
        await lsp.trust(mine, workspace)
        await mine.call("session/load", {"sessionId": SID})
        await lsp.trust(theirs, workspace)
    finally:
        await lsp.stop(mine)
        await lsp.stop(theirs)

    folders = [state, state / "sessions", state / "tool-results", state / "tool-results" / sid,
               config / "heddle"]
    files = [state / "sessions" / f"{sid}.jsonl", old, state / "tool-results" / sid /
             "toolu_g.txt", state / "heddle.log", config / "heddle" / "trusted-workspaces.json"]
    assert {str(f): oct(mode(f)) for f in folders} == {str(f): "0o700" for f in folders}
    assert {str(f): oct(mode(f)) for f in files} == {str(f): "0o600" for f in files}
    assert mode(elsewhere) == 0o644 and elsewhere.stat().st_size > 0
    assert mode(their_config) == 0o755 and mode(their_trust) == 0o600
    assert str(workspace) in their_trust.read_text()
