"""A workspace's `.heddle/settings.toml` in Neovim: the warning when a session ignores it,
`:AgentTrust` (which asks the daemon what trusting the file would enable), the next session
applying what it allows, and the warnings about problems in the file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from heddle.permissions.trust import review_project
from heddle.scripted import ScriptedServer

ALLOW_BASH = '[permissions]\nallow = ["Bash"]\n'
WARN = 3  # vim.log.levels.WARN


def bash(command: str) -> dict[str, Any]:
    return {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": command}}]}


def text(words: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": words}]}


def settings_file(workspace: Path, content: str = ALLOW_BASH) -> Path:
    path = workspace / ".heddle" / "settings.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(content)
    return path


def notes(editor) -> list[tuple[str, int]]:
    return [(note["message"], note["level"]) for note in editor.harness("notes")]


def wait_note(editor, count: int) -> tuple[str, int]:
    """Waits for the `count`th vim.notify call (the trust request answers asynchronously)."""
    editor.wait(f"#T.notes >= {count}", f"notification {count}")
    return notes(editor)[count - 1]


def wait_select(editor, count: int) -> dict[str, Any]:
    """Waits for the `count`th vim.ui.select (:AgentTrust asks after the daemon's review)."""
    editor.wait(f"#T.selects >= {count}", f"picker {count}")
    return editor.harness("selects")[count - 1]


def trusted(workspace: Path, tmp_path: Path) -> bool:
    """Whether the daemon's trust record holds the file as it is now (the editor's config dir)."""
    environ = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "xdg" / "config")}
    return review_project(workspace, environ).trusted


def test_agent_trust_makes_the_next_session_apply_the_allow_rule(
        editor, scripted: ScriptedServer, workspace: Path, tmp_path: Path) -> None:
    settings = settings_file(workspace)
    scripted.add_scenario("trust", {"steps": [
        bash("echo before > ran.txt"),
        {**text("Not run."), "match": {"lastUserContains": "not before it is trusted"}},
        bash("echo after > ran.txt"),
        text("Ran it."),
    ]})
    editor.setup(model="trust")
    editor.answer(selects=["reject"], inputs=["not before it is trusted"])

    editor.cmd("AgentRun run it")
    first = editor.wait_idle()

    assert first["last"]["reason"] == "completed"
    assert not (workspace / "ran.txt").exists()
    [asked] = editor.harness("selects")
    assert asked["kind"] == "heddle.permission"  # the project's allow rule was ignored
    # One warning, saying what to do; the daemon's own (it names `heddle trust -w`) is not
    # shown beside it, neither by the plugin nor by Neovim's LSP client.
    assert notes(editor) == [(
        f"heddle: {settings} is not trusted, so Heddle ignores what it would enable: allow rule"
        " Bash. Review it, then run :AgentTrust to trust it.", WARN)]
    messages = editor.nvim.api.exec2("messages", {"output": True})["output"]
    assert "heddle trust -w" not in messages and "LSP[heddle]" not in messages

    editor.answer(selects=["trust"])
    editor.cmd("AgentTrust")

    question = wait_select(editor, 2)
    assert question["kind"] == "heddle.trust"
    assert question["prompt"] == f"Heddle: trust {settings}? It enables: allow rule Bash"
    assert question["items"] == ["Trust it", "Review the file", "Not now"]
    assert wait_note(editor, 2) == (
        f"heddle: trusts {settings} now, which enables allow rule Bash. The next prompt starts a"
        " new session, which applies it.", 2)
    assert trusted(workspace, tmp_path)

    # Asked again, :AgentTrust says so instead of asking.
    editor.cmd("AgentTrust")
    assert wait_note(editor, 3) == (
        f"heddle: {settings} is already trusted as it is now; it enables allow rule Bash", 2)
    assert len(editor.harness("selects")) == 2

    editor.cmd("AgentRun run it again")
    second = editor.wait_idle()

    assert second["last"]["reason"] == "completed"
    assert (workspace / "ran.txt").read_text() == "after\n"
    assert len(editor.harness("selects")) == 2, "the Bash call ran without asking"
    assert second["session_id"] != first["session_id"]
    assert second["buf"] != first["buf"], "a new conversation"
    assert "- ✓ Run: echo after > ran.txt — exit 0" in editor.transcript()
    assert len(notes(editor)) == 3, "the new session warned about nothing"


def test_agent_trust_refuses_a_changed_file_and_reviews_it_as_it_is(
        editor, scripted: ScriptedServer, workspace: Path, tmp_path: Path) -> None:
    settings = settings_file(workspace)
    scripted.add_scenario("hello", {"steps": [text("Hello.")]})
    editor.setup(model="hello")
    editor.cmd("AgentRun hello")
    editor.wait_idle()
    assert notes(editor)[0][1] == WARN

    health = editor.lua("vim.cmd('checkhealth heddle') return vim.api.nvim_buf_get_lines(0, 0, -1,"
                        " false)")
    assert f"- ⚠️ WARNING {settings} is not trusted: Heddle ignores allow rule Bash" in health
    editor.cmd("bwipeout")

    # "Not now" sends nothing.
    editor.answer(selects=["cancel"])
    editor.cmd("AgentTrust")
    assert wait_select(editor, 1)["prompt"] == (
        f"Heddle: trust {settings}? It enables: allow rule Bash")
    assert not trusted(workspace, tmp_path)

    # The daemon reviews the file as it is now, not as the session read it.
    changed = '[permissions]\nallow = ["Bash", "Edit"]\n'
    settings.write_text(changed)
    editor.answer(selects=["review"])
    editor.cmd("AgentTrust")
    assert wait_select(editor, 2)["prompt"] == (
        f"Heddle: trust {settings}? It enables: allow rule Bash; allow rule Edit")
    # "Review the file" opens it.
    assert editor.lua("return vim.api.nvim_buf_get_name(0)") == str(settings)
    editor.cmd("bwipeout")

    # The file changes while the question is open: the daemon refuses the reviewed hash.
    editor.answer(selects=["hold"])
    editor.cmd("AgentTrust")
    wait_select(editor, 3)
    settings.write_text(changed + 'deny = ["Bash(rm:*)"]\n')
    editor.lua("T.choose('trust')")
    assert wait_note(editor, 2) == (
        f"heddle: did not trust {settings}: it changed since it was shown to you. Run :AgentTrust"
        " again to review it as it is now.", WARN)
    assert not trusted(workspace, tmp_path)

    editor.answer(selects=["trust"])
    editor.cmd("AgentTrust")
    assert wait_select(editor, 4)["prompt"] == (
        f"Heddle: trust {settings}? It enables: allow rule Bash; allow rule Edit")
    assert wait_note(editor, 3) == (
        f"heddle: trusts {settings} now, which enables allow rule Bash; allow rule Edit. The next"
        " prompt starts a new session, which applies it.", 2)
    assert trusted(workspace, tmp_path)


def test_agent_trust_without_a_settings_file_or_with_one_that_only_narrows(
        editor, workspace: Path) -> None:
    editor.cmd("AgentTrust")

    assert wait_note(editor, 1) == (
        f"heddle: there is no {workspace}/.heddle/settings.toml, so there is nothing to trust", 2)

    settings = settings_file(workspace, '[permissions]\ndeny = ["Bash(rm:*)"]\n')
    editor.cmd("AgentTrust")

    assert wait_note(editor, 2) == (
        f"heddle: nothing in {settings} needs trust: all of it applies without trust", 2)
    assert editor.harness("selects") == []


def test_problems_in_the_settings_file_are_shown_as_warnings(
        editor, scripted: ScriptedServer, workspace: Path) -> None:
    problems = 'colour = "blue"\n[permissions]\nallow = ["Bash", "Bash("]\n'
    settings = settings_file(workspace, problems)
    scripted.add_scenario("hello", {"steps": [text("Hello.")], "repeat": True})
    editor.setup(model="hello")

    editor.cmd("AgentRun hello")
    editor.wait_idle()

    warnings = [
        (f"heddle: {settings}: colour: unknown setting (ignored)", WARN),
        (f"heddle: {settings}: permissions.allow[1]: 'Bash(' is not a rule: the pattern must end"
         " with ')' (ignored)", WARN),
        # The untrusted-settings warning once, from the plugin, saying what to do.
        (f"heddle: {settings} is not trusted, so Heddle ignores what it would enable: allow rule"
         " Bash. Review it, then run :AgentTrust to trust it.", WARN),
    ]
    assert notes(editor) == warnings

    # Each session opened says so again.
    editor.cmd("AgentNew")
    editor.cmd("AgentRun hello again")
    editor.wait_idle()
    assert notes(editor) == warnings + warnings
