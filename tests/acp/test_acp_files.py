"""fs delegation: with `fs.readTextFile` / `fs.writeTextFile` advertised, Read and the edit
tools go through the client (its unsaved text); without, the client is never asked."""

from __future__ import annotations

import asyncio

from acp import text_block

from acp_harness import Recorder, agent, capabilities


def read_edit() -> dict:
    return {"steps": [
        {"content": [{"type": "tool_use", "name": "Read", "input": {"path": "app.py"}}]},
        {"match": {"lastUserContains": "UNSAVED"},
         "content": [{"type": "tool_use", "name": "Edit", "input": {
             "path": "app.py", "old_string": "UNSAVED", "new_string": "EDITED"}}]},
        {"content": [{"type": "text", "text": "Done."}]}]}


async def test_reads_and_edits_go_through_the_client(scripted, daemon_env, workspace):
    scripted.add_scenario("fs", read_edit())
    app = str(workspace / "app.py")
    on_disk = (workspace / "app.py").read_text()
    client = Recorder()
    client.buffers[app] = "# UNSAVED\n" + on_disk  # the editor's buffer, not saved
    async with agent({**daemon_env, "HEDDLE_MODEL": "fs"}, workspace, client,
                     capabilities(read=True, write=True)) as (conn, _, _):
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        await conn.set_session_mode(session_id=sid, mode_id="acceptEdits")
        result = await asyncio.wait_for(conn.prompt(session_id=sid,
                                                    prompt=[text_block("Edit")]), 30)
    assert result.stop_reason == "end_turn"
    assert app in client.reads
    assert client.writes == [(app, "# EDITED\n" + on_disk)]
    assert (workspace / "app.py").read_text() == on_disk  # the disk is the editor's business
    assert [c["status"] for c in client.calls().values()] == ["completed", "completed"]


async def test_write_only_edits_land_through_the_client_new_files_on_disk(
        scripted, daemon_env, workspace):
    scripted.add_scenario("new", {"steps": [
        {"content": [{"type": "tool_use", "name": "Read", "input": {"path": "missing.txt"}},
                     {"type": "tool_use", "name": "Read", "input": {"path": "README.md"}},
                     {"type": "tool_use", "name": "Write",
                      "input": {"path": "README.md", "content": "# Renamed\n"}},
                     {"type": "tool_use", "name": "Write",
                      "input": {"path": "notes.txt", "content": "hello\n"}}]},
        {"match": {"lastUserContains": "does not exist"},
         "content": [{"type": "text", "text": "Done."}]}]})
    client = Recorder()
    readme = (workspace / "README.md").read_text()
    async with agent({**daemon_env, "HEDDLE_MODEL": "new"}, workspace, client,
                     capabilities(write=True)) as (conn, _, _):
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        await conn.set_session_mode(session_id=sid, mode_id="acceptEdits")
        result = await asyncio.wait_for(conn.prompt(session_id=sid,
                                                    prompt=[text_block("Write")]), 30)
    assert result.stop_reason == "end_turn"  # Read said the missing file does not exist
    assert client.writes == [(str(workspace / "README.md"), "# Renamed\n")]
    assert (workspace / "README.md").read_text() == readme  # the client's business
    assert (workspace / "notes.txt").read_text() == "hello\n"  # a new file: on disk
    assert client.reads == []  # readTextFile was not advertised


async def test_no_capability_no_client_call(scripted, daemon_env, workspace):
    scripted.add_scenario("disk", {"steps": [
        {"content": [{"type": "tool_use", "name": "Read", "input": {"path": "app.py"}}]},
        {"match": {"lastUserContains": "def greet"},
         "content": [{"type": "tool_use", "name": "Edit", "input": {
             "path": "app.py", "old_string": "def greet", "new_string": "def hello"}}]},
        {"content": [{"type": "text", "text": "Done."}]}]})
    client = Recorder()
    async with agent({**daemon_env, "HEDDLE_MODEL": "disk"}, workspace, client) as (conn, _, _):
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        await conn.set_session_mode(session_id=sid, mode_id="acceptEdits")
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("Edit")]), 30)
    assert client.reads == [] and client.writes == []
    assert "def hello" in (workspace / "app.py").read_text()
