"""The permission pipeline through the daemon: modes, rules from settings files and their
precedence, allow-always saved and read again, rules methods, hooks, and how prompts are sent."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from e2e import lsp
from e2e.test_turns import new_session

DONE = {"content": [{"type": "text", "text": "Done."}]}


def tool(name: str, **inp) -> dict:
    return {"type": "tool_use", "name": name, "input": inp}


def steps(*calls: dict) -> dict:
    return {"steps": [{"content": list(calls)}, DONE]}


def write_settings(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def env(daemon_env, tmp_path) -> dict[str, str]:
    return dict(daemon_env, XDG_CONFIG_HOME=str(tmp_path / "config"))


@pytest.fixture
def user_file(tmp_path) -> Path:
    return tmp_path / "config/heddle/settings.toml"


@pytest.fixture
async def client(env, daemon_command):
    c = await lsp.start(env, daemon_command)
    yield c
    await lsp.stop(c)


def statuses(client) -> list[str]:
    return [e["status"] for e in client.turn_events("toolCallFinished")]


def last_results(scripted, model: str) -> list[dict]:
    return [b for b in scripted.requests_for(model)[-1].body["messages"][-1]["content"]
            if b["type"] == "tool_result"]


async def test_each_mode(client, scripted, workspace):
    client.answer = lambda params: {"decision": "reject", "message": "not now"}
    expected = {  # Read, Write, Bash; and the tools that asked
        "default": (["ok", "rejected", "rejected"], ["Write", "Bash"]),
        "acceptEdits": (["ok", "ok", "rejected"], ["Bash"]),
        "plan": (["ok", "rejected", "rejected"], []),
        "bypassPermissions": (["ok", "ok", "ok"], []),
    }
    for mode, (want, asked) in expected.items():
        scripted.add_scenario(mode, steps(tool("Read", path="app.py"),
                                          tool("Write", path=f"{mode}.txt", content="x"),
                                          tool("Bash", command=f"touch ran-{mode}")))
        client.events.clear()
        client.permission_requests.clear()
        sid = await new_session(client, workspace, mode, permissionMode=mode)
        result = await client.call("turn/start", {"sessionId": sid, "prompt": "go"})
        assert result["reason"] == "completed"
        assert statuses(client) == want, mode
        assert [r["tool"] for r in client.permission_requests] == asked, mode
        assert (workspace / f"{mode}.txt").exists() == (want[1] == "ok")
        assert (workspace / f"ran-{mode}").exists() == (want[2] == "ok")
    plan = last_results(scripted, "plan")
    assert plan[1]["content"].startswith("Write is not available in plan mode")
    assert plan[2]["content"].startswith("This command is not available in plan mode: touch is "
                                         "not on the list of read-only commands")
    assert last_results(scripted, "default")[1]["content"] == (
        "The user rejected this Write call and said: not now")


async def test_rules_from_both_files_and_their_precedence(client, scripted, workspace, user_file):
    write_settings(user_file, '[permissions]\nallow = ["Bash(echo:*)", "Read"]\n')
    write_settings(workspace / ".heddle/settings.toml", """
[permissions]
deny = ["Bash(echo secret:*)"]
ask = ["Read(README.md)"]
""")
    scripted.add_scenario("rules", steps(
        tool("Bash", command="echo hi"), tool("Bash", command="echo secret stuff"),
        tool("Bash", command="echo hi && touch pwned"), tool("Read", path="README.md"),
        tool("Read", path="app.py")))
    sid = await new_session(client, workspace, "rules")
    rules = await client.call("rules/list", {"sessionId": sid})
    assert rules["rules"] == [
        {"rule": "Bash(echo:*)", "kind": "allow", "scope": "user"},
        {"rule": "Read", "kind": "allow", "scope": "user"},
        {"rule": "Bash(echo secret:*)", "kind": "deny", "scope": "project"},
        {"rule": "Read(README.md)", "kind": "ask", "scope": "project"}]
    assert rules["userSettings"] == str(user_file)
    client.answer = lambda p: {"decision": "reject"} if p["tool"] == "Bash" else {
        "decision": "allowOnce"}

    await client.call("turn/start", {"sessionId": sid, "prompt": "go"})

    assert statuses(client) == ["ok", "rejected", "rejected", "ok", "ok"]
    # the allow rule covers `echo` but not the `touch` chained after it: that one asked
    assert [r["title"] for r in client.permission_requests] == [
        "Run: echo hi && touch pwned", "Read README.md"]
    assert not (workspace / "pwned").exists()
    denied = client.turn_events("permissionAnswered")[0]
    assert denied["reason"] == "Bash is denied by the rule Bash(echo secret:*) (project settings)."


async def test_allow_always_is_saved_and_read_again(env, daemon_command, scripted, workspace,
                                                    user_file):
    scripted.add_scenario("first", steps(tool("Bash", command="echo one")))
    scripted.add_scenario("second", steps(tool("Bash", command="echo two")))
    project_file = workspace / ".heddle/settings.toml"
    c = await lsp.start(env, daemon_command)
    try:
        def always(params):  # the user widens the offered rule and keeps it in the project
            assert params["options"][1]["rule"] == "Bash(echo one:*)"
            return {"decision": "allowAlways", "rule": "Bash(echo:*)", "scope": "project"}
        c.answer = always
        sid = await new_session(c, workspace, "first")
        await c.call("turn/start", {"sessionId": sid, "prompt": "go"})
        answered = c.turn_events("permissionAnswered")[0]
        assert (answered["rule"], answered["scope"]) == ("Bash(echo:*)", "project")
    finally:
        await lsp.stop(c)
    assert tomllib.loads(project_file.read_text()) == {"permissions": {"allow": ["Bash(echo:*)"]}}

    c = await lsp.start(env, daemon_command)  # a new daemon reads the file again
    try:
        sid = await new_session(c, workspace, "second")
        result = await c.call("turn/start", {"sessionId": sid, "prompt": "go"})
        assert result["reason"] == "completed" and c.permission_requests == []
        assert last_results(scripted, "second")[0]["content"] == "Exit code 0\ntwo\n"

        revoked = await c.call("rules/revoke", {"sessionId": sid, "rule": "Bash(echo:*)"})
        assert revoked == {"revoked": [{"rule": "Bash(echo:*)", "kind": "allow",
                                        "scope": "project"}]}
        added = await c.call("rules/add", {"sessionId": sid, "rule": "Bash(rm:*)",
                                           "kind": "deny", "scope": "user"})
        assert added == {"rule": {"rule": "Bash(rm:*)", "kind": "deny", "scope": "user"}}
        listed = await c.call("rules/list", {"sessionId": sid})
        assert listed["rules"] == [added["rule"]]
        with pytest.raises(Exception, match=r"'Bash\(rm' is not a rule.*\$\.rule"):
            await c.call("rules/add", {"sessionId": sid, "rule": "Bash(rm"})
        with pytest.raises(Exception, match="no session 'nope'"):
            await c.call("rules/list", {"sessionId": "nope"})
    finally:
        await lsp.stop(c)
    assert tomllib.loads(project_file.read_text()) == {"permissions": {"allow": []}}
    assert tomllib.loads(user_file.read_text()) == {"permissions": {"deny": ["Bash(rm:*)"]}}


HOOKS = """
[[hooks.PreToolUse]]
matcher = "Bash"
command = "grep -q '\\"rm ' && {{ echo 'deleting files is not allowed here' >&2; exit 2; }} || true"

[[hooks.PreToolUse]]
matcher = "Bash"
command = "grep -q '\\"echo ' && echo '{{\\"decision\\": \\"allow\\", \\"reason\\": \\"echo is harmless\\"}}' || true"

[[hooks.PreToolUse]]
matcher = "Write"
command = "{python} -c \\"import json,sys; e=json.load(sys.stdin); i=e['tool_input']; i['content']=i['content'].upper(); print(json.dumps({{'updatedInput': i}}))\\""

[[hooks.PreToolUse]]
command = "sleep 10"
timeout = 0.2

[[hooks.PostToolUse]]
matcher = "Write|Edit"
command = "echo 'run the formatter next' >&2; exit 2"
"""


async def test_hooks_allow_deny_and_modify(client, scripted, workspace):
    write_settings(workspace / ".heddle/settings.toml", HOOKS.format(python=sys.executable))
    await lsp.trust(client, workspace)
    scripted.add_scenario("hooks", steps(
        tool("Bash", command="rm app.py"), tool("Bash", command="echo hello"),
        tool("Write", path="notes.txt", content="quiet words\n")))
    sid = await new_session(client, workspace, "hooks")

    result = await client.call("turn/start", {"sessionId": sid, "prompt": "go"})

    assert result["reason"] == "completed"
    assert (workspace / "app.py").exists()
    assert (workspace / "notes.txt").read_text() == "QUIET WORDS\n"
    assert [r["tool"] for r in client.permission_requests] == ["Write"]  # echo: the hook allowed
    assert "QUIET WORDS" in client.permission_requests[0]["preview"]["diff"]
    rm, echo, write = last_results(scripted, "hooks")
    assert rm["content"] == "A hook blocked this Bash call: deleting files is not allowed here"
    assert echo["content"] == "Exit code 0\nhello\n" and not echo["is_error"]
    assert write["is_error"] and write["content"].endswith(
        "\n\n[PostToolUse hook] run the formatter next")
    assert statuses(client) == ["rejected", "ok", "error"]
    log = (workspace.parent / "heddle.log").read_text()
    assert "hook `sleep 10` timed out after 0.2 s" in log


async def test_prompts_do_not_wait_for_the_stream_and_come_one_at_a_time(client, scripted,
                                                                         workspace):
    write_settings(workspace / ".heddle/settings.toml",
                   '[permissions]\nask = ["Read(*.md)", "Read(app.py)"]\n')
    scripted.add_scenario("race", {"steps": [
        {"content": [tool("Read", path="README.md"), tool("Read", path="app.py"),
                     {"type": "text", "text": "word " * 60}], "chunk": 5, "delayMs": 15},
        DONE]})
    in_flight, most, deltas_at_ask = 0, 0, []

    async def answer(params):
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        deltas_at_ask.append(len(client.turn_events("textDelta")))
        await asyncio.sleep(0.3)
        in_flight -= 1
        return {"decision": "allowOnce"}

    client.answer = answer
    sid = await new_session(client, workspace, "race")
    await client.call("turn/start", {"sessionId": sid, "prompt": "go"})

    assert len(client.permission_requests) == 2 and most == 1  # serialised per session
    # the first prompt went out while the answer's text was still streaming
    assert deltas_at_ask[0] < len(client.turn_events("textDelta"))
    assert statuses(client) == ["ok", "ok"]


async def test_bad_settings_are_reported_and_ignored(client, scripted, workspace):
    write_settings(workspace / ".heddle/settings.toml",
                   '[permissions]\nmode = "yolo"\nallow = ["Bash("]\n')
    scripted.add_scenario("chat", {"steps": [DONE]})
    result = await client.call("session/new", {"workspace": str(workspace), "model": "chat"})
    assert result["permissionMode"] == "default"
    assert any("permissions.mode" in w for w in result["warnings"])
    assert any("'Bash(' is not a rule" in w for w in result["warnings"])
    done = await client.call("turn/start", {"sessionId": result["sessionId"], "prompt": "hi"})
    assert done["text"] == "Done."


def test_terminal_client_applies_settings(env, scripted, workspace):
    write_settings(workspace / ".heddle/settings.toml", '[permissions]\nallow = ["Bash(echo:*)"]\n')
    scripted.add_scenario("ask", steps(tool("Bash", command="echo from-rule"),
                                       tool("Write", path="x.txt", content="x")))
    scripted.add_scenario("plan", steps(tool("Write", path="y.txt", content="y")))

    def heddle(*args, command="ask"):
        return subprocess.run([sys.executable, "-I", "-m", "heddle", command, "-w", str(workspace),
                               *args], env=env, capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL)

    assert heddle("--yes", command="trust").returncode == 0  # the project's allow rule widens
    rejected = heddle("-m", "ask", "--no", "go")
    assert rejected.returncode == 0, rejected.stderr
    for line in ("● Run: echo from-rule", "  └ exit 0", "● Write x.txt",
                 "  ✗ Write x.txt: rejected"):  # after echo's output: the result names its call
        assert line in rejected.stdout.splitlines()  # the rule let echo run; --no refused Write
    assert not (workspace / "x.txt").exists()
    planned = heddle("-m", "plan", "--mode", "plan", "-y", "go")
    assert "✗ rejected: denied" in planned.stdout and not (workspace / "y.txt").exists()
    assert "not available in plan mode" in planned.stdout
