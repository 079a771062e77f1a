"""Sessions from Neovim: resumed after the daemon dies, listed and resumed with :AgentSessions and
:AgentResume, closed when left (their MCP servers stopped); the session's rules listed and
revoked; mode and model changed for the next turn."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from conftest import child_pids
from heddle.scripted import ScriptedServer
from procs import wait_dead
from test_chat import has_line
from test_turns import assistant_texts, user_texts


def text(t: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": t}]}


def notes(editor) -> list[str]:
    return [n["message"] for n in editor.harness("notes")]


def pids(starts: Path) -> list[int]:
    return [int(line) for line in starts.read_text().split()] if starts.exists() else []


def request(editor, method: str, params: dict[str, Any]) -> Any:
    """A request to the plugin's daemon, answered inside Neovim (with a deadline)."""
    return editor.lua("""
        local method, params = ...
        local out
        require('heddle.client').request(method, params, function(err, result)
          out = { err = err, result = result }
        end)
        vim.wait(10000, function() return out ~= nil end, 10)
        return out and (out.result or { error = out.err }) or { error = 'no answer' }""",
                      method, params)


def test_a_daemon_crash_resumes_the_session_and_sessions_can_be_resumed(
        editor, scripted: ScriptedServer, workspace: Path) -> None:
    scripted.add_scenario("resume", {"steps": [
        text("First answer."), text("Second answer, same session."), text("Fresh start."),
        text("Third answer, resumed from the list."),
    ]})
    editor.setup(model="resume")
    editor.cmd("AgentRun one")
    first = editor.wait_idle()["session_id"]

    # 1. The daemon dies: the next prompt loads the session in a new daemon and continues it.
    [daemon] = child_pids(editor.pid)
    os.kill(daemon, signal.SIGKILL)
    editor.wait("require('heddle.client').get() == nil", "the daemon's exit")
    editor.cmd("AgentRun two")
    status = editor.wait_idle()
    assert status["session_id"] == first
    assert status["last"]["reason"] == "completed"
    lines = editor.transcript()
    assert lines[:3] == ["## one", "", "First answer."]  # the history, replayed
    resumed = "- resumed the session after the daemon restarted (1 earlier turn)"
    assert lines[lines.index(resumed):lines.index(resumed) + 5] == [
        resumed, "", "## two", "", "Second answer, same session."]
    assert any(resumed[2:] in n for n in notes(editor))
    second = scripted.requests_for("resume")[1]
    assert user_texts(second)[0] == "one" and "First answer." in assistant_texts(second)

    # 2. :AgentSessions lists the workspace's sessions; the one chosen is replayed (here after
    # another restart, so into its emptied buffer) and continued.
    editor.cmd("AgentNew fresh")
    fresh = editor.wait_idle()["session_id"]
    assert fresh != first
    [daemon] = child_pids(editor.pid)
    os.kill(daemon, signal.SIGKILL)
    editor.wait("require('heddle.client').get() == nil", "the daemon's exit")
    editor.answer(selects=[2])
    editor.cmd("AgentSessions")
    editor.wait(f"require('heddle').status().session_id == {first!r}", "the resumed session")
    [picker] = editor.harness("selects")
    assert picker["prompt"] == "Heddle sessions"
    assert [item.split(" · ")[0] for item in picker["items"]] == ["fresh", "one"]
    assert picker["items"][0].endswith(" · completed (current)")
    assert picker["items"][1].endswith(" · completed")
    editor.wait("vim.tbl_contains(vim.api.nvim_buf_get_lines(require('heddle').status().buf,"
                " 0, -1, false), '- resumed: one (2 turns); the next prompt continues it')",
                "the replayed history")
    lines = editor.transcript()
    assert lines[:3] == ["## one", "", "First answer."]
    assert lines.count("## one") == 1 and "Second answer, same session." in lines
    assert editor.lua("return vim.api.nvim_buf_get_name(require('heddle').status().buf)") == \
        "heddle://session/1"
    editor.cmd("AgentRun three")
    assert editor.wait_idle()["session_id"] == first
    third = scripted.requests_for("resume")[3]
    assert user_texts(third)[:2] == ["one", "two"]

    # 3. :AgentResume without a name resumes the latest other session.
    editor.cmd("AgentResume")
    editor.wait(f"require('heddle').status().session_id == {fresh!r}", "the other session")
    editor.wait("vim.tbl_contains(vim.api.nvim_buf_get_lines(require('heddle').status().buf,"
                " 0, -1, false), 'Fresh start.')", "its history")
    assert editor.transcript()[0] == "## fresh"


def test_rules_are_listed_and_revoked_and_mode_and_model_apply_to_the_next_turn(
        editor, scripted: ScriptedServer, workspace: Path) -> None:
    (workspace / "app.py").write_text("x = 1\n")
    echo = {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": "echo hi"}}]}
    edit = {"content": [{"type": "tool_use", "name": "Edit", "input": {
        "path": "app.py", "old_string": "x = 1", "new_string": "x = 2"}}]}
    scripted.add_scenario("rules", {"steps": [echo, text("Ran it."), edit, text("Could not.")]})
    scripted.add_scenario("other", {"steps": [
        {"content": [{"type": "text", "text": "Another model here. " + "word " * 200}],
         "chunk": 5, "delayMs": 20}]})
    editor.setup(model="rules")
    editor.answer(selects=["allowAlways"])
    editor.cmd("AgentRun say hi")
    editor.wait_idle()
    sid = editor.status()["session_id"]

    # 1. :AgentRules lists the session's rules; the one chosen is revoked.
    editor.answer(selects=[1])
    editor.cmd("AgentRules")
    editor.wait("(function() for _, n in ipairs(T.notes) do if n.message:find('revoked', 1, true)"
                " then return true end end return false end)()", "the revocation")
    picker = editor.harness("selects")[-1]
    assert picker["prompt"] == "Heddle rules (choose one to revoke)"
    assert picker["items"] == ["allow Bash(echo hi:*) (session)"]
    assert "heddle: revoked allow Bash(echo hi:*) (session)" in notes(editor)
    assert request(editor, "rules/list", {"sessionId": sid})["rules"] == []

    # 2. :AgentMode picks the mode; the next turn of the same session runs in it: plan
    # refuses the edit without asking, and the output says why.
    editor.answer(selects=["plan"])
    editor.cmd("AgentMode")
    editor.wait("require('heddle').status().mode == 'plan'", "the mode change")
    assert editor.harness("selects")[-1]["items"] == [
        "default (current)", "acceptEdits", "plan", "bypassPermissions"]
    asked = len(editor.harness("selects"))
    editor.cmd("AgentRun change x")
    editor.wait_idle()
    assert editor.status()["session_id"] == sid
    assert len(editor.harness("selects")) == asked  # nobody was asked
    [line] = [line for line in editor.transcript() if line.startswith("- ⊘ Edit app.py")]
    assert line.startswith("- ⊘ Edit app.py — rejected: ") and "plan" in line, line
    assert (workspace / "app.py").read_text() == "x = 1\n"

    # 3. :AgentModel changes the model of the next turn, same session.
    editor.cmd("AgentModel other")
    editor.wait("require('heddle').status().model == 'other'", "the model change")
    editor.cmd("AgentRun who are you?")
    editor.wait("(function() local s = require('heddle').status() return s.state == 'running'"
                " and s.turn_id ~= nil end)()", "the turn to run")
    # 4. A change while the turn runs waits for it to end, then applies.
    editor.cmd("AgentMode acceptEdits")
    assert "heddle: mode acceptEdits from the next turn (a turn is running or the session is " \
        "not loaded yet)" in notes(editor)
    assert editor.status()["mode"] == "plan"
    editor.wait_idle()
    editor.wait("require('heddle').status().mode == 'acceptEdits'", "the change after the turn")
    assert editor.status()["session_id"] == sid
    assert len(scripted.requests_for("other")) == 1
    assert any(line.startswith("Another model here.") for line in editor.transcript())
    assert "- mode plan, model other from the next turn" in editor.transcript()


MCP_SERVER = Path(__file__).parents[1] / "e2e" / "mcp_server.py"


def test_a_session_left_is_closed_with_its_mcp_server_and_resumes_into_its_buffer(
        editor, scripted: ScriptedServer, workspace: Path, tmp_path: Path) -> None:
    starts = tmp_path / "starts.txt"
    settings = tmp_path / "xdg" / "config" / "heddle" / "settings.toml"
    settings.parent.mkdir(parents=True)
    settings.write_text(
        f'[mcp]\nstartup_timeout = 40\n\n[mcp.servers.srv]\ncommand = "{sys.executable}"\n'
        f'args = ["-I", "{MCP_SERVER}"]\nenv = {{ MCP_TEST_STARTS = "{starts}" }}\n')
    scripted.add_scenario("leave", {"steps": [
        text("First answer."),
        {"content": [{"type": "text", "text": "word " * 400}], "chunk": 5, "delayMs": 50},
        text("Back in the first session."),
        {"content": [{"type": "text", "text": "more " * 400}], "chunk": 5, "delayMs": 50},
        text("Still the first session."),
    ]})
    editor.setup(model="leave")
    editor.cmd("AgentRun one")
    first = editor.wait_idle()["session_id"]

    def live() -> dict[str, bool]:
        listed = request(editor, "session/list", {"workspace": str(workspace)})
        return {s["sessionId"]: s["live"] for s in listed["sessions"]}

    def settles(expected: dict[str, bool]) -> None:
        """The daemon's live sessions come to be `expected` (a close is sent when a load
        answers, and loads wait for their MCP servers)."""
        deadline = time.monotonic() + 20
        while (found := live()) != expected and time.monotonic() < deadline:
            time.sleep(0.05)
        assert found == expected

    # 1. :AgentNew: the session left (idle) is closed, its MCP server stopped.
    editor.cmd("AgentNew write an essay")
    editor.wait("require('heddle').status().session_id ~= nil and "
                f"require('heddle').status().session_id ~= {first!r}", "the second session")
    second = editor.status()["session_id"]
    [server] = pids(starts)[:1]
    assert wait_dead([server], time.monotonic() + 10) == [], "the first session's MCP server"
    assert live() == {first: False, second: True}

    # 2. :AgentResume from the running turn: it is cancelled and its session closed; the first
    # is replayed into its own buffer and continued.
    editor.wait(has_line("word word"), "the essay to stream")
    editor.cmd(f"AgentResume {first}")
    editor.wait("vim.tbl_contains(vim.api.nvim_buf_get_lines(require('heddle').status().buf,"
                " 0, -1, false), '- resumed: one (1 turn); the next prompt continues it')",
                "the replayed history")
    assert editor.lua("return vim.api.nvim_buf_get_name(require('heddle').status().buf)") == \
        "heddle://session/1"
    assert editor.transcript()[:3] == ["## one", "", "First answer."]
    editor.wait(f"(function() local b = vim.fn.bufnr('heddle://session/2'); for _, l in "
                f"ipairs(vim.api.nvim_buf_get_lines(b, 0, -1, false)) do if l:find('^_cancelled') "
                f"then return true end end return false end)()", "the left turn's footer")
    settles({first: True, second: False})
    servers = pids(starts)
    assert len(servers) == 3  # one per session opened or loaded
    assert wait_dead(servers[1:2], time.monotonic() + 10) == [], "the second session's server"
    editor.cmd("AgentRun three")
    assert editor.wait_idle()["session_id"] == first
    assert user_texts(scripted.requests_for("leave")[-1])[0] == "one"

    # 3. Away and back at once, while a turn runs: the first session is closed (its turn
    # cancelled) and the second loaded, the second closed once loaded, the first loaded once
    # closed. Both end as the editor has them, and the first goes on.
    editor.cmd("AgentRun keep going")
    editor.wait(has_line("more more"), "the answer to stream")
    editor.cmd(f"AgentResume {second}")
    editor.cmd(f"AgentResume {first}")
    editor.wait("vim.tbl_contains(vim.api.nvim_buf_get_lines(require('heddle').status().buf,"
                " 0, -1, false), '- resumed: one (3 turns); the next prompt continues it')",
                "the first session replayed again")
    editor.wait(has_line("_cancelled"), "the cancelled turn's footer")
    settles({first: True, second: False})
    editor.cmd("AgentRun four")
    status = editor.wait_idle()
    assert status["session_id"] == first and status["last"]["reason"] == "completed"
    assert editor.transcript()[-3:-1] == ["Still the first session.", ""]
    assert editor.errors() == []


def test_a_new_session_names_its_instruction_files(editor, scripted: ScriptedServer,
                                                   workspace: Path, tmp_path: Path) -> None:
    scripted.add_scenario("told", {"steps": [text("Noted.")]})
    (workspace / "AGENTS.md").write_text("Keep answers short.\n")
    mine = tmp_path / "xdg" / "config" / "heddle" / "AGENTS.md"  # the daemon's XDG_CONFIG_HOME
    mine.parent.mkdir(parents=True, exist_ok=True)
    mine.write_text("I like tests.\n")
    editor.setup(model="told")
    editor.cmd("AgentRun hello")
    # a minute: the daemon's first model call waits for the SDK's import on a loaded machine
    assert editor.wait_idle(timeout=60)["last"]["reason"] == "completed"
    lines = editor.transcript()
    # under the first prompt, once its session has opened
    assert lines[:5] == ["## hello", "", f"- instructions: {mine}, AGENTS.md", "", "Noted."], lines
    (request,) = scripted.requests_for("told")
    assert user_texts(request) == ["hello"]  # the files went to the model in the briefing
    sent = request.body["messages"][0]["content"][1]["text"]
    assert "Keep answers short." in sent and "I like tests." in sent
