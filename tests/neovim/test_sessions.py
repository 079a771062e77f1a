"""Sessions from Neovim: resumed after the daemon dies, listed and resumed with :AgentSessions and
:AgentResume; the session's rules listed and revoked; mode and model changed for the next turn."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from conftest import child_pids
from heddle.scripted import ScriptedServer
from test_turns import assistant_texts, user_texts


def text(t: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": t}]}


def notes(editor) -> list[str]:
    return [n["message"] for n in editor.harness("notes")]


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
