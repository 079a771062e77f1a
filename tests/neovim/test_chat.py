"""The chat in Neovim: live command output, failures, highlighting, the prompt window and its
keys, the statusline, the float layout; queueing and steering while a turn runs.

Each test walks through several turns of one editor and daemon, since a daemon's start is the
slowest step."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from heddle.scripted import ScriptedServer
from test_turns import user_texts


def bash(command: str) -> dict[str, Any]:
    return {"type": "tool_use", "name": "Bash", "input": {"command": command}}


def gated(workspace: Path, name: str, before: str, after: str) -> str:
    """A command that prints `before`, waits (at most 20 s) for the file `name`, prints `after`."""
    gate = workspace / name
    return (f"echo {before}; for i in $(seq 400); do [ -f {gate} ] && break; sleep 0.05; done; "
            f"echo {after}")


def line_with(editor, text: str) -> str:
    return editor.lua("for _, l in ipairs(vim.api.nvim_buf_get_lines(require('heddle').status()"
                      ".buf, 0, -1, false)) do if l:find(..., 1, true) then return l end end "
                      "return ''", text)


def has_line(text: str) -> str:
    """A Lua condition: the output buffer has a line containing `text`."""
    return ("(function() for _, l in ipairs(vim.api.nvim_buf_get_lines(require('heddle')"
            f".status().buf, 0, -1, false)) do if l:find({text!r}, 1, true) then return true end"
            " end return false end)()")


HIGHLIGHTS = """
local buf = require('heddle').status().buf
local ns = vim.api.nvim_get_namespaces()['heddle.highlight']
local out = {}
for _, m in ipairs(vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, { details = true })) do
  local line = vim.api.nvim_buf_get_lines(buf, m[2], m[2] + 1, false)[1]
  out[#out + 1] = { line, m[4].hl_group or m[4].line_hl_group }
end
return out
"""

# The syntax group at the first `_` of `word` in the output buffer, and at the `##` header.
SYNTAX = """
local word = ...
local buf = require('heddle').status().buf
local win = vim.fn.win_findbuf(buf)[1]
return vim.api.nvim_win_call(win, function()
  local found = {}
  for row, l in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) do
    local col = l:find(word, 1, true)
    if col and not found.word then
      found.word = vim.fn.synIDattr(vim.fn.synID(row, col + l:sub(col):find('_') - 1, 1), 'name')
    end
    if l:sub(1, 3) == '## ' and not found.header then
      found.header = vim.fn.synIDattr(vim.fn.synID(row, 1, 1), 'name')
    end
  end
  return found
end)
"""


def feed(editor, keys: str) -> None:
    editor.lua("vim.api.nvim_feedkeys(vim.keycode(...), 'mx', false)", keys)


def chat_windows(editor) -> list[dict[str, Any]]:
    return editor.lua("""
        local out = {}
        for _, win in ipairs(require('heddle.chat').windows()) do
          local buf = vim.api.nvim_win_get_buf(win)
          out[#out + 1] = { name = vim.api.nvim_buf_get_name(buf),
                            float = vim.api.nvim_win_get_config(win).relative ~= '' }
        end
        table.sort(out, function(a, b) return a.name < b.name end)
        return out""")


def test_live_output_failures_highlights_and_the_chat_keys(
        editor, scripted: ScriptedServer, workspace: Path) -> None:
    (workspace / "app.py").write_text("def greet(name):\n    return 'Hello, ' + name\n")
    scripted.add_scenario("live", {"steps": [
        {"content": [bash(gated(workspace, "go", "first_live_line", "last_live_line"))]},
        {"content": [{"type": "text", "text": "Now a failing one."},
                     bash("for i in $(seq 30); do echo row $i; done; exit 3")]},
        {"content": [{"type": "tool_use", "name": "Edit", "input": {
            "path": "app.py", "old_string": "'Hello, ' + name", "new_string": "f'Hello, {name}'"}}]},
        {"content": [{"type": "text", "text": "The snake_case_name helper failed."}]},
        # the follow-up typed in the prompt window, cancelled with <C-c>
        {"content": [{"type": "text", "text": "word " * 400}], "chunk": 5, "delayMs": 50},
    ]})
    editor.setup(model="live", permission_mode="bypassPermissions")
    assert editor.lua("return require('heddle').statusline()") == ""
    editor.cmd("AgentRun run the checks")

    # 1. The command's first line shows while it still runs.
    editor.wait(has_line("│ first_live_line"), "live output")
    assert line_with(editor, "Run:").startswith("- ⋯ ")
    assert line_with(editor, "last_live_line") == ""
    assert editor.lua("return require('heddle').statusline()").startswith("heddle running")
    (workspace / "go").write_text("")
    editor.wait_idle()

    lines = editor.transcript()
    run = [i for i, line in enumerate(lines) if line.startswith("- ") and "Run:" in line]
    assert lines[run[0]].startswith("- ✓ ")
    assert lines[run[0] + 1:run[0] + 3] == ["  │ first_live_line", "  │ last_live_line"]
    # 2. The failing command is marked failed with its exit code, its long output collapsed
    # to its tail.
    failed = lines[run[1]]
    assert failed.startswith("- ✗ Run: ") and failed.endswith("— failed: exit code 3"), failed
    tail = lines[run[1] + 1:lines.index("  │ row 30") + 1]
    assert tail[-9:] == ["  │ ⋯ 22 earlier lines (<Tab> shows them)",
                         *[f"  │ row {i}" for i in range(23, 31)]]
    highlights = editor.lua(HIGHLIGHTS)
    assert [failed, "HeddleToolError"] in highlights
    assert ["  │ row 30", "HeddleOutput"] in highlights, "\n".join(map(repr, highlights))
    # <Tab> on it shows all of it, and again only the tail.
    editor.lua("local buf = require('heddle').status().buf; local win = vim.fn.win_findbuf(buf)[1]"
               "; vim.api.nvim_set_current_win(win); vim.api.nvim_win_set_cursor(win, {..., 0})",
               run[1] + 3)
    feed(editor, "<Tab>")
    assert "  │ row 1" in editor.transcript()
    feed(editor, "<Tab>")
    assert "  │ row 1" not in editor.transcript()

    # 3. The edit's diff is coloured by extmarks; snake_case is not markdown's error.
    assert ["  -    return 'Hello, ' + name", "HeddleDiffDelete"] in highlights
    assert ["  +    return f'Hello, {name}'", "HeddleDiffAdd"] in highlights
    syntax = editor.lua(SYNTAX, "snake_case_name")
    assert syntax["header"].startswith("markdown"), syntax  # markdown's syntax is on
    assert syntax["word"] != "markdownError", syntax

    # 4. The footer has the turn's tokens and the share read from the cache; the statusline
    # the state and the context in use.
    footer = lines[-1]
    assert re.fullmatch(r"_completed · 4 model calls · \d+ tokens in \(\d+% from cache\), "
                        r"\d+ out_", footer), footer
    assert re.fullmatch(r"heddle idle · ctx \d+% · bypassPermissions",
                        editor.lua("return require('heddle').statusline()"))

    # 5. A follow-up typed in the prompt window is sent with <CR>; <C-c> cancels it.
    prompt_win = "vim.fn.win_findbuf(require('heddle.chat').input_buffer())[1]"
    editor.lua(f"vim.api.nvim_set_current_win({prompt_win});"
               "vim.api.nvim_buf_set_lines(0, 0, -1, false, {'and now', 'write an essay'})")
    feed(editor, "<CR>")
    editor.wait(has_line("word word"), "the follow-up's answer")
    assert editor.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)") == [""]
    assert "## and now" in editor.transcript()
    assert "write an essay" in user_texts(scripted.requests_for("live")[-1])[-1]
    feed(editor, "<C-c>")
    assert editor.wait_idle()["last"]["reason"] == "cancelled"

    # 6. q closes the chat; :AgentToggle brings it back, here as a float.
    assert chat_windows(editor) == [{"name": "heddle://prompt", "float": False},
                                    {"name": "heddle://session/1", "float": False}]
    editor.lua("vim.api.nvim_set_current_win(vim.fn.win_findbuf(require('heddle').status().buf)[1])")
    feed(editor, "q")  # from the output
    assert chat_windows(editor) == []
    editor.cmd("AgentToggle")
    assert len(chat_windows(editor)) == 2
    assert editor.lua("return vim.api.nvim_buf_get_name(0)") == "heddle://prompt"
    feed(editor, "q")  # from the prompt
    assert chat_windows(editor) == []
    editor.setup(model="live", window={"layout": "float"})
    editor.cmd("AgentToggle")
    assert chat_windows(editor) == [{"name": "heddle://prompt", "float": True},
                                    {"name": "heddle://session/1", "float": True}]
    editor.cmd("AgentToggle")
    assert chat_windows(editor) == []


def test_prompts_sent_while_a_turn_runs_are_queued_or_steer_it(
        editor, scripted: ScriptedServer, workspace: Path) -> None:
    scripted.add_scenario("busy", {"steps": [
        {"content": [bash(gated(workspace, "go", "working", "finished"))]},
        {"content": [{"type": "text", "text": "Done, and I saw your note."}]},
        {"content": [{"type": "text", "text": "word " * 400}], "chunk": 5, "delayMs": 50},
        {"content": [{"type": "text", "text": "Steered."}]},
    ]})
    editor.setup(model="busy", permission_mode="bypassPermissions")
    editor.cmd("AgentRun build it")
    editor.wait(has_line("│ working"), "the command to run")

    # 1. Plain :AgentRun while busy queues the prompt and says so.
    editor.cmd("AgentRun also update the changelog")
    assert "- queued: also update the changelog" in editor.transcript()
    assert any("queued" in n["message"] for n in editor.harness("notes"))
    # The daemon handles requests in the order they came, and queues a prompt before its first
    # await: once a later request is answered, the prompt is queued (under load, the command
    # could otherwise finish before the daemon read it, and it would run as a turn of its own).
    assert editor.lua("local answered = false; require('heddle.client').request("
                      "'session/list', {}, function() answered = true end); "
                      "return vim.wait(10000, function() return answered end, 10)") is True
    (workspace / "go").write_text("")
    status = editor.wait_idle()
    assert status["last"]["reason"] == "completed"
    # The running turn took it in at its next step: one turn, one footer.
    second = scripted.requests_for("busy")[1]
    assert any("also update the changelog" in t for t in user_texts(second))
    assert sum(line.startswith("_completed") for line in editor.transcript()) == 1

    # 2. :AgentRun! interrupts the running turn with the new prompt.
    editor.cmd("AgentRun write an essay")
    editor.wait(has_line("word word"), "the essay to stream")
    editor.cmd("AgentRun! stop, summarise instead")
    status = editor.wait_idle()
    assert status["last"]["reason"] == "completed"
    lines = editor.transcript()
    essay = lines.index("## write an essay")
    after = [line for line in lines[essay:] if not line.startswith("word")]
    assert after[0] == "## write an essay"
    assert "- steering: stop, summarise instead" in after
    # the cancelled call's input is billed, so its footer counts it
    (cancelled,) = [i for i, line in enumerate(after) if line.startswith("_cancelled")]
    assert re.fullmatch(r"_cancelled while the model was answering · 1 model call · \d+ tokens "
                        r"in.*, 0 out_", after[cancelled]), after[cancelled]
    steered = after.index("## stop, summarise instead")
    assert after[steered:steered + 3] == ["## stop, summarise instead", "", "Steered."]
    assert cancelled < steered
    assert user_texts(scripted.requests_for("busy")[-1])[-1].startswith("stop, summarise instead")


def test_thinking_shows_dimmed_under_a_line_of_its_own_its_tail_until_tab(
        editor, scripted: ScriptedServer, workspace: Path) -> None:
    (workspace / "app.py").write_text("print('hello')\n")
    model = "claude-sonnet-4-5-20250929"  # a model that thinks: thinking is on by default
    thought = "Line one\nLine two\nLine three\nLine four"
    scripted.add_scenario(model, {"apiModel": model, "steps": [
        {"content": [{"type": "thinking", "thinking": thought, "signature": "s1"},
                     {"type": "tool_use", "name": "Read", "input": {"path": "app.py"}}]},
        {"content": [{"type": "thinking", "thinking": "Done thinking.", "signature": "s2"},
                     {"type": "text", "text": "It greets."}]},
    ]})
    editor.setup(model=model, permission_mode="bypassPermissions")
    editor.cmd("AgentRun what does app.py do")
    assert editor.wait_idle()["last"]["reason"] == "completed"
    assert scripted.requests_for(model)[0].body["thinking"]["type"] == "enabled"
    lines = editor.transcript()
    first = lines.index("- ✻ thinking")
    assert lines[first:first + 4] == ["- ✻ thinking",
                                      "  │ ⋯ 2 earlier lines (<Tab> shows them)",
                                      "  │ Line three", "  │ Line four"]
    assert lines[first + 4].startswith("- ✓ Read app.py")
    # the thinking after the tool call has a line of its own, and the answer follows it
    assert lines[first + 5:first + 9] == ["- ✻ thinking", "  │ Done thinking.", "",
                                          "It greets."]
    highlights = editor.lua(HIGHLIGHTS)
    assert ["- ✻ thinking", "HeddleThinking"] in highlights
    assert ["  │ Line four", "HeddleOutput"] in highlights  # dimmed, as command output
    # <Tab> on it shows all of it, and again only its tail
    editor.lua("local buf = require('heddle').status().buf; local win = vim.fn.win_findbuf(buf)[1]"
               "; vim.api.nvim_set_current_win(win); vim.api.nvim_win_set_cursor(win, {..., 0})",
               first + 1)
    feed(editor, "<Tab>")
    assert "  │ Line one" in editor.transcript()
    feed(editor, "<Tab>")
    assert "  │ Line one" not in editor.transcript()
