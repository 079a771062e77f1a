"""The tools through the daemon: the new tools, invalid input, parallel read-only calls, the
workspace boundary, unsaved editor buffers, secrets, and Bash's process group on cancel."""

from __future__ import annotations

import asyncio
import errno
import os
import time
from pathlib import Path

import pytest
from lsprotocol import types as lsp_types
from pytest_lsp import ClientServerConfig

from e2e import lsp
from e2e.test_permissions import DONE, last_results, statuses, steps, tool
from e2e.test_turns import new_session
from procs import all_dead


@pytest.fixture
async def client(daemon_env, daemon_command, tmp_path):
    c = await lsp.start(dict(daemon_env, XDG_CONFIG_HOME=str(tmp_path / "config"),
                             MY_SERVICE_TOKEN="tok-secret-123"), daemon_command)
    yield c
    await lsp.stop(c)


async def turn(client, workspace, model: str, mode: str = "bypassPermissions", **extra) -> dict:
    sid = await new_session(client, workspace, model, permissionMode=mode)
    return await client.call("turn/start", {"sessionId": sid, "prompt": "go", **extra})


async def test_new_tools(client, scripted, workspace):
    scripted.add_scenario("tools", {"steps": [
        {"content": [
            tool("TodoWrite", todos=[
                {"content": "Look around", "status": "in_progress", "active_form": "Looking"},
                {"content": "Write the notes", "status": "pending"}]),
            tool("LS"), tool("Glob", pattern="**/*.py"), tool("Grep", pattern="greet",
                                                              output_mode="count")]},
        {"content": [
            tool("Write", path="docs/notes.md", content="one\ntwo\n"),
            tool("MultiEdit", path="docs/notes.md", edits=[
                {"old_string": "one", "new_string": "1"}, {"old_string": "two", "new_string": "2"}]),
            tool("TodoWrite", todos=[
                {"content": "Look around", "status": "completed"},
                {"content": "Write the notes", "status": "completed"}])]},
        DONE]})

    result = await turn(client, workspace, "tools")

    assert result["reason"] == "completed"
    assert (workspace / "docs/notes.md").read_text() == "1\n2\n"
    assert statuses(client) == ["ok"] * 7
    todos = client.turn_events("todo")
    assert todos[0]["todos"] == [
        {"content": "Look around", "status": "inProgress", "activeForm": "Looking"},
        {"content": "Write the notes", "status": "pending"}]
    assert [t["status"] for t in todos[1]["todos"]] == ["completed", "completed"]
    first = [r["content"] for r in scripted.requests_for("tools")[1].body["messages"][-1]["content"]]
    assert first[1:] == ["README.md  (26 B)\napp.py  (69 B)", "app.py", "app.py:2"]
    write, multi, _ = last_results(scripted, "tools")
    assert write["content"] == "Created docs/notes.md (2 lines)."
    assert multi["content"] == "Edited docs/notes.md (2 replacements from 2 edits)."
    finished = client.turn_events("toolCallFinished")
    assert finished[5]["diff"].startswith("--- a/docs/notes.md")
    tools = [t["name"] for t in scripted.requests_for("tools")[0].body["tools"]]
    assert tools == ["Read", "Glob", "Grep", "LS", "Edit", "MultiEdit", "Write", "Bash",
                     "TodoWrite", "Task", "PresentPlan"]


async def test_invalid_tool_input_names_the_field(client, scripted, workspace):
    scripted.add_scenario("bad", steps(tool("Read", path=5), tool("Edit", path="app.py"),
                                       tool("Grep", pattern="x", output_mode="lines")))
    result = await turn(client, workspace, "bad")
    assert result["reason"] == "completed"
    read, edit, grep = last_results(scripted, "bad")
    assert read == {"type": "tool_result", "tool_use_id": read["tool_use_id"], "is_error": True,
                    "content": "Invalid input for Read: Expected `str`, got `int` - at `$.path` "
                               "(path: File to read, absolute or relative to the workspace)"}
    assert "missing required field `old_string`" in edit["content"]
    assert "at `$.output_mode`" in grep["content"]
    assert statuses(client) == ["error"] * 3


def _open_writer(path: Path) -> int | None:
    """A write end for the FIFO once a reader has it open (never blocks)."""
    try:
        return os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            return None
        raise


async def test_parallel_read_only_tools_overlap(client, scripted, workspace):
    """Three Greps of FIFOs (ripgrep reads a named pipe it is given; Read refuses them). No FIFO
    gets its data until all three have a reader and Glob and LS have finished: run one after
    the other, the first Grep would wait for its data forever (here: until the 20 s deadline)
    and the others would never start; run together they all pass the barrier."""
    fifos = [workspace / f"pipe{i}" for i in range(3)]
    for f in fifos:
        os.mkfifo(f)
    scripted.add_scenario("parallel", steps(*[tool("Grep", pattern="data", path=f.name)
                                              for f in fifos],
                                            tool("Glob", pattern="*.py"), tool("LS")))
    deadline = time.monotonic() + 20
    barrier: list[bool] = []  # the gate's verdict, once: True when every condition was met

    def others_done() -> bool:
        return sorted(e["tool"] for e in client.turn_events("toolCallFinished")) == ["Glob", "LS"]

    async def feed() -> None:
        fds: dict[Path, int] = {}
        fed: set[Path] = set()
        while len(fed) < len(fifos) and time.monotonic() < deadline + 10:
            for f in fifos:
                if f not in fds and (fd := _open_writer(f)) is not None:
                    fds[f] = fd  # this Grep is running: blocked reading its FIFO
            if not barrier and len(fds) == len(fifos) and others_done():
                barrier.append(True)
            elif not barrier and time.monotonic() > deadline:
                barrier.append(False)  # release whatever runs, so the turn ends; the test fails
            if barrier:
                for f, fd in fds.items():
                    if f not in fed:
                        os.write(fd, f"data from {f.name}\n".encode())
                        os.close(fd)
                        fed.add(f)
            await asyncio.sleep(0.005)
        for f, fd in fds.items():
            if f not in fed:
                os.close(fd)

    sid = await new_session(client, workspace, "parallel")
    feeder = asyncio.ensure_future(feed())
    result = await client.call("turn/start", {"sessionId": sid, "prompt": "go"}, timeout=40)
    await asyncio.wait_for(feeder, 25)

    assert barrier == [True], "the three Greps never ran together (or Glob and LS waited)"
    assert result["reason"] == "completed"
    contents = [r["content"] for r in last_results(scripted, "parallel")]
    for i in range(3):
        assert f"data from pipe{i}" in contents[i], contents[i]
    finished = [e["tool"] for e in client.turn_events("toolCallFinished")]
    assert sorted(finished[:2]) == ["Glob", "LS"]  # not queued behind the blocked Greps


async def test_escape_attempts_are_refused_even_when_bypassing_permissions(client, scripted,
                                                                           workspace):
    outside = workspace.parent / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret\n")
    (workspace / "link").symlink_to(outside)
    (workspace / "dangling").symlink_to(outside / "created.txt")
    attempts = [
        tool("Read", path="../outside/secret.txt"),
        tool("Read", path=str(outside / "secret.txt")),
        tool("Read", path="link/secret.txt"),
        tool("Read", path="~/.bashrc"),
        tool("Write", path="dangling", content="x"),
        tool("Edit", path="link/secret.txt", old_string="top", new_string="no"),
        tool("MultiEdit", path="../outside/new.txt", edits=[{"old_string": "", "new_string": "x"}]),
        tool("LS", path=".."),
        tool("Glob", pattern="**/*", path="/"),
        tool("Grep", pattern="secret", path="link"),
    ]
    scripted.add_scenario("escape", steps(*attempts))
    result = await turn(client, workspace, "escape")
    assert result["reason"] == "completed"
    results = last_results(scripted, "escape")
    assert len(results) == len(attempts)
    for attempt, r in zip(attempts, results):
        assert r["is_error"] and "is outside the workspace" in r["content"], attempt
        assert "top secret" not in r["content"]
    assert client.permission_requests == []
    assert (outside / "secret.txt").read_text() == "top secret\n"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


async def test_read_may_page_through_this_sessions_saved_results_and_nothing_else_of_heddles(
        client, scripted, workspace, daemon_env):
    (workspace / "many.txt").write_text("".join(f"needle {i}\n" for i in range(6000)))
    state = Path(daemon_env["XDG_STATE_HOME"]) / "heddle"
    other = state / "tool-results/0123456789abcdef0123456789abcdef/toolu_x.txt"
    other.parent.mkdir(parents=True)
    other.write_text("another session's result\n")
    sid = await new_session(client, workspace, "s", permissionMode="bypassPermissions")
    mine = state / "tool-results" / sid / "toolu_grep.txt"
    transcript = state / "sessions" / f"{sid}.jsonl"
    scripted.add_scenario("s", {"steps": [
        {"content": [{"type": "tool_use", "id": "toolu_grep", "name": "Grep",
                      "input": {"pattern": "needle"}}]},
        {"content": [tool("Read", path=str(mine), offset=10, limit=1),
                     tool("Read", path=str(other)),
                     tool("Read", path=str(transcript)),
                     tool("Read", path=f"{mine.parent}/../{other.parent.name}/{other.name}"),
                     tool("Grep", pattern="needle", path=str(mine.parent)),
                     tool("Write", path=str(mine), content="rewritten")]},
        DONE]})

    result = await client.call("turn/start", {"sessionId": sid, "prompt": "find"})

    assert result["reason"] == "completed" and transcript.exists()
    own, *refused = last_results(scripted, "s")
    assert not own["is_error"] and own["content"].startswith("    10\tmany.txt:10:needle 9\n")
    assert len(refused) == 5
    for r in refused:  # other sessions' results, transcripts; and only Read, only reading
        assert r["is_error"] and "is outside the workspace" in r["content"], r
    assert "another session" not in str(refused)
    assert mine.read_text().count("needle") == 6000


async def test_edits_never_clobber_unsaved_editor_changes(daemon_env, daemon_command, scripted,
                                                          workspace):
    config = ClientServerConfig(server_command=daemon_command, client_factory=lsp.make_client,
                                server_env=daemon_env)  # a client that keeps the initialize result
    client = await config.start()
    try:
        init = await client.initialize_session(lsp_types.InitializeParams(
            capabilities=lsp_types.ClientCapabilities(
                experimental={"heddle": {"permissionRequests": True}})))
        sync = init.capabilities.text_document_sync
        assert sync.open_close and sync.change == lsp_types.TextDocumentSyncKind.Incremental
        await _unsaved_changes(client, scripted, workspace)
    finally:
        await lsp.stop(client)


async def _unsaved_changes(client, scripted, workspace):
    app = workspace / "app.py"
    uri = app.as_uri()
    on_disk = app.read_text()
    client.text_document_did_open(lsp_types.DidOpenTextDocumentParams(
        lsp_types.TextDocumentItem(uri=uri, language_id="python", version=1,
                                   text=on_disk + "# the user is typing\n")))
    edit = tool("Edit", path="app.py", old_string="'Hello, ' + name", new_string="f'Hi {name}'")
    scripted.add_scenario("edit", {"steps": [{"content": [edit]}, DONE, {"content": [edit]}, DONE]})
    sid = await new_session(client, workspace, "edit", permissionMode="acceptEdits")

    await client.call("turn/start", {"sessionId": sid, "prompt": "go"})
    (refused,) = last_results(scripted, "edit")
    assert refused["is_error"] and "app.py has unsaved changes in the editor" in refused["content"]
    assert app.read_text() == on_disk
    finished = client.turn_events("toolCallFinished")[-1]
    assert finished["status"] == "error" and "unsaved changes" in finished["summary"]

    # the user undoes the typing (an incremental change): the buffer matches the disk again
    lines = on_disk.count("\n")
    client.text_document_did_change(lsp_types.DidChangeTextDocumentParams(
        lsp_types.VersionedTextDocumentIdentifier(version=2, uri=uri),
        [lsp_types.TextDocumentContentChangePartial(
            range=lsp_types.Range(lsp_types.Position(lines, 0), lsp_types.Position(lines + 1, 0)),
            text="")]))
    await client.call("turn/start", {"sessionId": sid, "prompt": "again"})
    assert "f'Hi {name}'" in app.read_text()
    client.text_document_did_close(lsp_types.DidCloseTextDocumentParams(
        lsp_types.TextDocumentIdentifier(uri=uri)))


async def test_secrets_stay_out_of_tools_transcripts_and_logs(client, scripted, workspace):
    scripted.add_scenario("env", steps(tool("Bash", command="env; echo key=$ANTHROPIC_API_KEY")))
    await turn(client, workspace, "env")
    (result,) = last_results(scripted, "env")
    assert "PATH=" in result["content"] and "key=\n" in result["content"]
    sent = str([r.body for r in scripted.requests_for("env")])
    log = (workspace.parent / "heddle.log").read_text()
    transcripts = [p.read_text() for p in (workspace.parent / "state").rglob("*.jsonl")]
    assert transcripts and "key=" in transcripts[0]
    for secret in ("tok-secret-123", "MY_SERVICE_TOKEN", "test-key"):
        assert secret not in sent and secret not in log
        assert not any(secret in t for t in transcripts)


async def test_cancel_leaves_no_survivors(client, scripted, workspace):
    command = ("(trap '' TERM; sleep 60) & echo $! > a.pid; "
               "bash -c 'trap \"\" TERM; sleep 60 & echo $! > b.pid; wait' & wait")
    scripted.add_scenario("cancel", steps(tool("Bash", command=command)))
    sid = await new_session(client, workspace, "cancel", permissionMode="bypassPermissions")
    running = asyncio.ensure_future(client.call("turn/start", {"sessionId": sid, "prompt": "go"}))
    pids = []
    for name in ("a.pid", "b.pid"):
        path = workspace / name
        deadline = time.monotonic() + 30
        while not path.exists() or not path.read_text().strip():
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        pids.append(int(path.read_text()))

    client.protocol.notify("turn/cancel", {"sessionId": sid})
    result = await asyncio.wait_for(running, 15)

    assert (result["reason"], result["cancelPhase"]) == ("cancelled", "tools")
    assert await all_dead(pids)
