"""Tool input shaped as Claude models write it, through the daemon: `file_path`, Bash's
`description` (the call's title) and `timeout` in milliseconds, Grep's ripgrep flags run by a
real ripgrep, unknown fields ignored with a note, and an alias that disagrees with its field."""

from __future__ import annotations

import pytest

from e2e import lsp
from e2e.test_permissions import last_results, statuses, steps, tool
from e2e.test_turns import new_session


@pytest.fixture
async def client(daemon_env, daemon_command, tmp_path):
    c = await lsp.start(dict(daemon_env, XDG_CONFIG_HOME=str(tmp_path / "config")),
                        daemon_command)
    yield c
    await lsp.stop(c)


async def turn(client, workspace, model: str, mode: str = "bypassPermissions") -> dict:
    sid = await new_session(client, workspace, model, permissionMode=mode)
    return await client.call("turn/start", {"sessionId": sid, "prompt": "go"}, timeout=60)


async def test_file_path_and_bash_description_as_claude_writes_them(client, scripted, workspace):
    scripted.add_scenario("claude", steps(
        tool("Read", file_path=str(workspace / "app.py"), limit=2),
        tool("Edit", file_path="app.py", old_string="'Hello, '", new_string="'Hi, '"),
        tool("Write", file_path="docs/new.md", content="new\n"),
        tool("MultiEdit", file_path="docs/new.md", edits=[{"old_string": "new",
                                                           "new_string": "newer"}]),
        tool("Bash", command="echo $((6 * 7))", description="Multiply six by seven",
             timeout=15000)))

    assert (await turn(client, workspace, "claude"))["reason"] == "completed"

    read, edit, write, multi, bash = last_results(scripted, "claude")
    assert read["content"].startswith("     1\tdef greet(name):\n     2\t    return 'Hello, '")
    assert edit["content"] == "Edited app.py (1 replacement)."  # read before: no note
    assert write["content"] == "Created docs/new.md (1 line)."
    assert multi["content"] == "Edited docs/new.md (1 replacement from 1 edits)."
    assert bash["content"] == "Exit code 0\n42\n"
    assert statuses(client) == ["ok"] * 5
    assert "return 'Hi, ' + name" in (workspace / "app.py").read_text()
    assert (workspace / "docs/new.md").read_text() == "newer\n"
    titles = [e["title"] for e in client.turn_events("toolCallInput")]
    assert titles == ["Read app.py", "Edit app.py", "Write docs/new.md",
                      "Edit docs/new.md (1 change)", "Multiply six by seven"]


async def test_a_permission_prompt_names_the_command_not_the_description(client, scripted,
                                                                         workspace):
    scripted.add_scenario("asked", steps(tool("Bash", command="rm -f app.py",
                                              description="Tidy up")))
    client.answer = lambda params: {"decision": "reject"}

    await turn(client, workspace, "asked", mode="default")

    (call,) = client.turn_events("toolCallInput")
    assert call["title"] == "Tidy up"
    (request,) = client.permission_requests
    assert request["title"] == "Run: rm -f app.py"
    assert client.turn_events("permissionAsked")[0]["title"] == "Run: rm -f app.py"
    assert (workspace / "app.py").exists()


async def test_bash_timeout_is_in_milliseconds_and_bounded(client, scripted, workspace):
    scripted.add_scenario("timeouts", steps(
        tool("Bash", command="sleep 30", timeout=1000),
        tool("Bash", command="echo never", timeout=10 ** 15),
        tool("Bash", command="echo never", timeout=30),
        tool("Bash", command="echo never", timeout="15000")))

    assert (await turn(client, workspace, "timeouts"))["reason"] == "completed"

    slept, huge, small, text = last_results(scripted, "timeouts")
    assert slept["is_error"] and slept["content"].startswith(
        "Command timed out after 1 s (timeout 1000 ms) and was killed.")
    bounds = ("(timeout: Milliseconds before the command and its children are killed: 1000 to "
              "600000 (10 minutes); default 120000 (2 minutes))")
    assert huge == {"type": "tool_result", "tool_use_id": huge["tool_use_id"], "is_error": True,
                    "content": "Invalid input for Bash: Expected `float` <= 600000.0 - at "
                               f"`$.timeout` {bounds}"}
    assert small["content"] == ("Invalid input for Bash: Expected `float` >= 1000.0 - at "
                                f"`$.timeout` {bounds}")
    assert text["content"] == ("Invalid input for Bash: Expected `float`, got `str` - at "
                               f"`$.timeout` {bounds}")
    assert [e["summary"] for e in client.turn_events("toolCallFinished")][0] == \
        "timed out after 1 s"


GREP_FILES = {
    "src/a.py": "alpha\nBeta one\ngamma\ndelta\nbeta two\nepsilon\n",
    "src/b.txt": "beta three\n",
    "notes.md": "start\nfoo\nbar\nend\n",
}


async def test_grep_takes_ripgrep_flags(client, scripted, workspace):
    for name, text in GREP_FILES.items():
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text(text)
    scripted.add_scenario("grep", steps(
        tool("Grep", pattern="beta", path="src", **{"-i": True}),
        tool("Grep", pattern="beta", path="src"),
        tool("Grep", pattern="gamma", path="src", **{"-A": 1}),
        tool("Grep", pattern="gamma", path="src", **{"-B": 1}),
        tool("Grep", pattern="gamma|epsilon", path="src", **{"-C": 1, "-n": False}),
        tool("Grep", pattern="foo.bar", path="notes.md", multiline=True),
        tool("Grep", pattern="foo.bar", path="notes.md"),
        tool("Grep", pattern="beta", path="src", type="py", **{"-i": True}),
        tool("Grep", pattern="e", path="src/a.py", head_limit=2, offset=1),
        tool("Grep", pattern="e", path="src/a.py", offset=3),
        tool("Grep", pattern="e", path="src", output_mode="files_with_matches", head_limit=1),
        tool("Grep", pattern="x", type="nope"),
        tool("Grep", pattern="beta", path="src", case_insensitive=True, context=1,
             output_mode="count")))

    assert (await turn(client, workspace, "grep"))["reason"] == "completed"

    results = [r["content"] for r in last_results(scripted, "grep")]
    assert [r.splitlines() for r in results[:8]] == [
        ["src/a.py:2:Beta one", "src/a.py:5:beta two", "src/b.txt:1:beta three"],
        ["src/a.py:5:beta two", "src/b.txt:1:beta three"],
        ["src/a.py:3:gamma", "src/a.py-4-delta"],
        ["src/a.py-2-Beta one", "src/a.py:3:gamma"],
        ["src/a.py-Beta one", "src/a.py:gamma", "src/a.py-delta", "src/a.py-beta two",
         "src/a.py:epsilon"],
        ["notes.md:2:foo", "notes.md:3:bar"],
        ["No matches."],
        ["src/a.py:2:Beta one", "src/a.py:5:beta two"]]
    assert results[8] == ("src/a.py:4:delta\nsrc/a.py:5:beta two\n\n"
                          "(lines 2-3 of 4; read on with offset=3)")
    assert results[9] == "src/a.py:6:epsilon\n\n(lines 4-4 of 4)"
    assert results[10] == "src/a.py\n\n(lines 1-1 of 2; read on with offset=1)"
    assert results[11] == "rg: unrecognized file type: nope"
    assert results[12] == "src/a.py:2\nsrc/b.txt:1"  # the older names of -i and -C
    assert sorted(statuses(client)) == ["error"] + ["ok"] * 12  # they run side by side


async def test_unknown_fields_are_ignored_with_a_note(client, scripted, workspace):
    scripted.add_scenario("extra", steps(
        tool("Read", path="README.md", description="Look at the readme", pages=2),
        tool("MultiEdit", path="README.md", edits=[
            {"old_string": "tiny", "new_string": "small", "reason": "style"}]),
        tool("TodoWrite", todos=[{"content": "Check", "status": "in_progress",
                                  "activeForm": "Checking", "priority": "high"}]),
        tool("Read", path=5, extra=True)))

    assert (await turn(client, workspace, "extra"))["reason"] == "completed"

    read, multi, todo, bad = [r["content"] for r in last_results(scripted, "extra")]
    assert read.startswith("     1\t# Sample\n")
    assert read.endswith("\n\n(Ignored unknown fields `description`, `pages`: Read takes path "
                         "(or file_path), offset, limit.)")
    assert multi == ("Edited README.md (1 replacement from 1 edits).\n\n(Ignored unknown field "
                     "`edits[0].reason`: MultiEdit takes path (or file_path), edits.)")
    assert todo.endswith("(Ignored unknown field `todos[0].priority`: TodoWrite takes todos.)")
    assert client.turn_events("todo")[0]["todos"][0]["activeForm"] == "Checking"
    assert bad.startswith("Invalid input for Read: Expected `str`, got `int` - at `$.path`")
    assert statuses(client) == ["ok", "ok", "ok", "error"]
    assert (workspace / "README.md").read_text() == "# Sample\n\nA small project.\n"


async def test_path_and_file_path_that_disagree_are_an_error(client, scripted, workspace):
    scripted.add_scenario("both", steps(
        tool("Read", path="app.py", file_path="README.md"),
        tool("Read", path="app.py", file_path="app.py", limit=1)))

    assert (await turn(client, workspace, "both"))["reason"] == "completed"

    conflict, same = last_results(scripted, "both")
    assert conflict == {"type": "tool_result", "tool_use_id": conflict["tool_use_id"],
                        "is_error": True, "content": (
                            "Invalid input for Read: `path` and `file_path` are the same field, "
                            "given different values ('app.py' and 'README.md'); give only "
                            "`path`")}
    assert same["content"].startswith("     1\tdef greet(name):")
    assert statuses(client) == ["error", "ok"]
