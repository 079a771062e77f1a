"""What the agent read, kept by the session: Edit and Write refuse a file that changed since
(on disk, or in the editor's buffer), Write refuses an existing file never read, an Edit of a
file never read goes ahead and says so, and the agent's own edits keep it current."""

from __future__ import annotations

from e2e.test_editor_edits import editor  # noqa: F401  (the fixture: an editor client)
from e2e.test_permissions import DONE, last_results, statuses, tool
from e2e.test_tools import client  # noqa: F401  (the fixture)
from e2e.test_turns import new_session

EDIT = tool("Edit", path="app.py", old_string="'Hello, '", new_string="'Hi, '")


def turns(*calls: list[dict]) -> dict:
    """A scenario of one turn per list: each call in a response of its own, then Done."""
    return {"steps": [s for turn in calls for s in [{"content": [c]} for c in turn] + [DONE]]}


async def run(client, sid: str) -> dict:
    return await client.call("turn/start", {"sessionId": sid, "prompt": "go"}, timeout=60)


def results(scripted, model: str) -> list[dict]:
    """Every tool result the model got, in order."""
    return [b for r in scripted.requests_for(model) for b in r.body["messages"][-1]["content"]
            if isinstance(b, dict) and b.get("type") == "tool_result"]


async def test_an_edit_of_a_file_changed_on_disk_since_it_was_read_is_refused(
        client, scripted, workspace):  # noqa: F811
    scripted.add_scenario("disk", turns([tool("Read", path="app.py", limit=1)],
                                        [EDIT, tool("Read", path="app.py"), EDIT]))
    sid = await new_session(client, workspace, "disk", permissionMode="bypassPermissions")
    await run(client, sid)
    app = workspace / "app.py"
    app.write_text(app.read_text() + "# the user added this\n")

    await run(client, sid)  # the next turn: the session still knows what was read

    _, stale, _, edited = results(scripted, "disk")
    assert stale["is_error"] and stale["content"] == (
        "app.py changed since you read it (changed on disk), so it was not changed: Read it "
        "again, then redo the edit.")
    assert edited["content"] == "Edited app.py (1 replacement)."
    assert app.read_text() == ("def greet(name):\n    return 'Hi, ' + name\n\n\n"
                               "print(greet('world'))\n# the user added this\n")


async def test_an_edit_of_a_buffer_changed_since_it_was_read_is_refused(
        editor, scripted, workspace):  # noqa: F811
    app = workspace / "app.py"
    on_disk = app.read_text()
    editor.open(app, on_disk)
    scripted.add_scenario("buffer", turns([tool("Read", path="app.py")], [EDIT],
                                          [tool("Read", path="app.py"), EDIT]))
    sid = await new_session(editor.client, workspace, "buffer", permissionMode="acceptEdits")
    await run(editor.client, sid)
    editor.type(app, on_disk + "# typing\n")  # unsaved

    await run(editor.client, sid)
    (stale,) = last_results(scripted, "buffer")
    assert stale["is_error"] and stale["content"] == (
        "app.py changed since you read it (edited in the editor), so it was not changed: Read "
        "it again, then redo the edit.")
    assert editor.requests == []

    await run(editor.client, sid)  # read again: the edit goes through the editor
    read, edited = results(scripted, "buffer")[-2:]
    assert "     6\t# typing" in read["content"]
    assert edited["content"] == "Edited app.py (1 replacement)."
    assert editor.text(app) == on_disk.replace("'Hello, '", "'Hi, '") + "# typing\n"
    assert app.read_text() == on_disk


async def test_write_over_a_file_never_read_is_refused_an_edit_goes_ahead_with_a_note(
        client, scripted, workspace):  # noqa: F811
    scripted.add_scenario("unread", turns([
        tool("Write", path="README.md", content="# Replaced\n"),
        EDIT,
        tool("Write", path="fresh.md", content="new\n"),
        tool("Read", path="README.md", offset=2, limit=1),
        tool("Write", path="README.md", content="# Replaced\n")]))
    sid = await new_session(client, workspace, "unread", permissionMode="bypassPermissions")
    await run(client, sid)

    refused, edited, fresh, _, wrote = results(scripted, "unread")
    assert refused["is_error"] and refused["content"] == (
        "README.md already exists and you have not read it, so it was not overwritten: Read it "
        "first (Write replaces the whole file), or change part of it with Edit.")
    assert edited["content"] == (
        "Edited app.py (1 replacement).\n(You had not read app.py in this session: the edit "
        "was made where old_string matched. Read the file before further edits if you need to "
        "see the code around it.)")
    assert fresh["content"] == "Created fresh.md (1 line)."
    assert wrote["content"] == "Wrote README.md (1 line)."  # a part read is a read
    assert (workspace / "README.md").read_text() == "# Replaced\n"
    assert statuses(client) == ["error", "ok", "ok", "ok", "ok"]


async def test_the_agents_own_edits_keep_what_it_knows_current(client, scripted,
                                                             workspace):  # noqa: F811
    scripted.add_scenario("chain", turns([
        tool("Read", path="app.py"),
        EDIT,
        tool("Edit", path="app.py", old_string="'Hi, '", new_string="'Hey, '"),
        tool("MultiEdit", path="app.py", edits=[{"old_string": "world", "new_string": "all"}]),
        tool("Write", path="app.py", content="print('done')\n"),
        tool("Edit", path="app.py", old_string="done", new_string="finished")]))
    sid = await new_session(client, workspace, "chain", permissionMode="bypassPermissions")
    await run(client, sid)

    assert [r["content"] for r in results(scripted, "chain")[1:]] == [
        "Edited app.py (1 replacement).", "Edited app.py (1 replacement).",
        "Edited app.py (1 replacement from 1 edits).", "Wrote app.py (1 line).",
        "Edited app.py (1 replacement)."]
    assert (workspace / "app.py").read_text() == "print('finished')\n"


async def test_a_loaded_session_starts_knowing_no_file(client, scripted, workspace,
                                                      daemon_env):  # noqa: F811
    scripted.add_scenario("reload", turns([tool("Read", path="README.md")],
                                          [tool("Write", path="README.md", content="x\n")]))
    sid = await new_session(client, workspace, "reload", permissionMode="bypassPermissions")
    await run(client, sid)
    await client.call("session/close", {"sessionId": sid})
    await client.call("session/load", {"sessionId": sid})

    await run(client, sid)

    (refused,) = last_results(scripted, "reload")
    assert refused["is_error"] and refused["content"].startswith(
        "README.md already exists and you have not read it")


async def test_what_a_sub_agent_read_is_not_what_the_agent_read(client, scripted,
                                                                workspace):  # noqa: F811
    scripted.add_scenario("parent", {"steps": [
        {"content": [tool("Task", description="Look at the readme", prompt="Read README.md")]},
        {"match": {"lastUserContains": "Read README.md"},
         "content": [tool("Read", path="README.md")]},
        {"match": {"lastUserContains": "A tiny project"},
         "content": [{"type": "text", "text": "It says: A tiny project."}]},
        {"content": [tool("Write", path="README.md", content="x\n")]}, DONE]})
    sid = await new_session(client, workspace, "parent", permissionMode="bypassPermissions")
    await run(client, sid)

    (refused,) = last_results(scripted, "parent")
    assert refused["is_error"] and refused["content"].startswith(
        "README.md already exists and you have not read it")
