"""Turns from Neovim: streaming into the output buffer, range prompts, follow-ups, cancelling.

Each test starts its own Neovim and daemon, and the daemon's first model call is its slowest
step, so a test walks through several turns of one conversation rather than one turn each.
"""

from __future__ import annotations

import os
import re
import signal
import statistics
import time
from pathlib import Path
from typing import Any

from conftest import child_pids
from heddle.scripted import ScriptedServer

FOOTER = re.compile(
    r"^_completed · \d+ model calls? · \d+ tokens in( \(\d+% from cache\))?, \d+ out_$")

OUTPUT_WINDOW = "vim.fn.win_findbuf(require('heddle').status().buf)[1]"


BRIEFING = ("<environment>", "<instructions>", "<environment-update>")
"""How the daemon's own blocks in a user message start (docs/instructions.md)."""


def user_texts(request: Any) -> list[str]:
    """The text of every user message the model was sent, but the daemon's briefing blocks."""
    texts = []
    for message in request.body["messages"]:
        if message["role"] != "user":
            continue
        content = message["content"]
        if isinstance(content, str):
            texts.append(content)
            continue
        texts += [block["text"] for block in content if block["type"] == "text"
                  and not block["text"].startswith(BRIEFING)]
    return texts


def assistant_texts(request: Any) -> list[str]:
    texts = []
    for message in request.body["messages"]:
        if message["role"] == "assistant":
            content = message["content"]
            texts += [content] if isinstance(content, str) else [
                block["text"] for block in content if block["type"] == "text"]
    return texts


def test_turns_stream_into_a_split_and_follow_ups_continue_the_session(
        editor, scripted: ScriptedServer, workspace: Path) -> None:
    scripted.add_scenario("chat", {"steps": [
        # ~2 s of streaming: the first line is seen while the turn still runs, also when
        # Neovim gets little CPU
        {"content": [{"type": "text", "text": "Hello from Heddle.\nThe tests pass now."}],
         "chunk": 3, "delayMs": 150},
        {"content": [{"type": "text", "text": "It adds two numbers."}]},
        {"content": [{"type": "text", "text": "Fresh start."}]},
        {"fault": {"status": 400, "message": "the request is malformed"}},
    ]})
    (workspace / "calc.py").write_text(
        "import math\ndef add(a, b):\n    return a + b\n\nprint(math.pi)\n")
    editor.setup(model="chat")
    # plugin/heddle.lua only defines commands; the rest loads on first use.
    assert editor.lua("return package.loaded['heddle.session'] == nil") is True
    editor.lua("""vim.api.nvim_create_autocmd('User', { pattern = 'HeddleTurnDone',
        callback = function(ev) table.insert(T.done, (ev.data.result or {}).reason or 'error') end })
        T.done = {}""")

    # 1. A turn streams into a markdown split; text shows while the turn still runs.
    editor.cmd("AgentRun say hello")
    editor.wait("(function() local s = require('heddle').status()"
                " return s.state == 'running' and vim.tbl_contains("
                "vim.api.nvim_buf_get_lines(s.buf, 0, -1, false), 'Hello from Heddle.') end)()",
                "the first streamed line")
    first = editor.wait_idle()

    assert first["last"]["reason"] == "completed"
    lines = editor.transcript()
    assert lines[:-1] == ["## say hello", "", "Hello from Heddle.", "The tests pass now.", ""]
    assert FOOTER.match(lines[-1]), lines[-1]
    layout = editor.lua(f"""
        local buf = require('heddle').status().buf
        local win = {OUTPUT_WINDOW}
        return {{ name = vim.api.nvim_buf_get_name(buf), ft = vim.bo[buf].filetype,
                 buftype = vim.bo[buf].buftype, windows = #vim.api.nvim_list_wins(),
                 entered = vim.api.nvim_get_current_win() == win,
                 cursor = vim.api.nvim_win_get_cursor(win)[1] }}""")
    # The output window followed the tail, and the cursor stayed in the code window.
    assert layout == {"name": "heddle://session/1", "ft": "markdown", "buftype": "nofile",
                      "windows": 3, "entered": False, "cursor": len(lines)}

    # 2. A follow-up with a range and no prompt: the prompt is asked for, the lines go along.
    editor.lua(f"vim.api.nvim_win_set_cursor({OUTPUT_WINDOW}, {{1, 0}})")  # the user scrolls up
    editor.cmd("edit calc.py")
    editor.answer(inputs=["explain"])
    editor.cmd("2,3AgentRun")
    second = editor.wait_idle()

    assert editor.harness("inputs") == [{"prompt": "Heddle: "}]
    assert second["session_id"] == first["session_id"]
    assert [line for line in editor.transcript() if not FOOTER.match(line)] == [
        "## say hello", "", "Hello from Heddle.", "The tests pass now.", "", "",
        "## explain", "_selection: calc.py:2-3_", "", "It adds two numbers.", "",
    ]
    # The user had scrolled away, so the window stayed where they put it.
    assert editor.lua(f"return vim.api.nvim_win_get_cursor({OUTPUT_WINDOW})[1]") == 1
    requests = scripted.requests_for("chat")
    sent = "\n".join(user_texts(requests[1]))
    assert "say hello" in sent
    assert "def add(a, b):\n    return a + b" in sent
    assert str(workspace / "calc.py") in sent
    assert "print(math.pi)" not in sent
    assert "Hello from Heddle.\nThe tests pass now." in assistant_texts(requests[1])

    # 3. :AgentNew starts another session in a new buffer, shown in the same window.
    editor.cmd("AgentNew start over")
    third = editor.wait_idle()

    assert third["session_id"] != first["session_id"]
    assert editor.lua("return vim.api.nvim_buf_get_name(require('heddle').status().buf)") \
        == "heddle://session/2"
    assert editor.lua("return #vim.api.nvim_list_wins()") == 3
    assert editor.transcript()[:3] == ["## start over", "_file: calc.py_", ""]
    assert [m["role"] for m in scripted.requests_for("chat")[2].body["messages"]] == ["user"]

    # 4. A turn the model fails ends with the reason and the error.
    editor.cmd("AgentRun and now?")
    assert editor.wait_idle()["last"]["reason"] == "modelError"
    assert editor.transcript()[-4:] == [
        "## and now?", "_file: calc.py_", "", "_stopped: model error: the request is malformed_"]
    assert editor.harness("done") == ["completed", "completed", "completed", "modelError"]


def test_cancel_mid_turn_ends_the_turn_promptly_and_the_session_goes_on(
        editor, scripted: ScriptedServer, tmp_path: Path) -> None:
    scripted.add_scenario("slow", {"steps": [
        # 400 chunks 50 ms apart: 20 s unless cancelled.
        {"content": [{"type": "text", "text": "word " * 400}], "chunk": 5, "delayMs": 50},
        # Cut off by the output limit: the daemon raises the limit and asks again.
        {"content": [{"type": "text", "text": "A short ans"}], "stopReason": "max_tokens"},
        {"content": [{"type": "text", "text": "A short answer."}]},
    ]})
    editor.setup(model="slow")
    editor.cmd("AgentRun write a long essay")
    editor.wait("(function() local s = require('heddle').status() return s.turn_id ~= nil"
                " and (vim.api.nvim_buf_get_lines(s.buf, 2, 3, false)[1] or ''):find('word') ~= nil"
                " end)()", "streamed text")

    # The editor answers promptly while text streams in.
    latencies = []
    for _ in range(20):
        sent = time.monotonic()
        editor.lua("return vim.api.nvim_buf_line_count(0)")
        latencies.append(time.monotonic() - sent)
    assert editor.status()["state"] == "running"
    # (the median: a loaded machine may stall any one round trip)
    assert statistics.median(latencies) < 0.25, latencies

    started = time.monotonic()
    editor.cmd("AgentCancel")
    status = editor.wait_idle(timeout=10)
    elapsed = time.monotonic() - started

    assert status["last"]["reason"] == "cancelled"
    assert elapsed < 10, f"cancelling took {elapsed:.1f} s"  # of a 20 s answer
    lines = editor.transcript()
    assert lines[:2] == ["## write a long essay", ""]
    assert lines[2].startswith("word")
    assert lines[3] == ""
    # the footer counts the cancelled call's input, which is billed: "· 1 model call · N tokens in"
    assert re.fullmatch(r"_cancelled while the model was answering · 1 model call · \d+ tokens "
                        r"in( \(\d+% from cache\))?, 0 out_", lines[4]), lines[4]
    assert len(lines) == 5
    # Nothing is left to cancel.
    assert editor.lua("return require('heddle').cancel()") is False

    # The next prompt continues the session. Its first answer is cut off by the output limit
    # and written again: the cut-off text is replaced, not left above the new one.
    editor.cmd("AgentRun shorter, please")
    assert editor.wait_idle()["last"]["reason"] == "completed"
    lines = editor.transcript()
    turn = lines[lines.index("## shorter, please"):]
    assert turn[:-1] == [
        "## shorter, please", "",
        "- ↺ answering again (the output limit was raised and the answer is being written again)",
        "", "A short answer.", "",
    ]
    assert FOOTER.match(turn[-1])

    # :AgentLog moves into the output; :AgentLog! opens the daemon's log file.
    editor.cmd("AgentLog")
    assert editor.lua("return vim.api.nvim_get_current_buf() == require('heddle').status().buf")
    editor.cmd("AgentLog!")
    assert editor.lua("return vim.fn.expand('%:p')") == str(
        tmp_path / "xdg" / "state" / "heddle" / "heddle.log")
    assert editor.lua("return vim.api.nvim_buf_line_count(0)") > 1

    # If the daemon dies, the output says so: the next prompt resumes the session.
    session_id = editor.status()["session_id"]
    [daemon] = child_pids(editor.pid)
    os.kill(daemon, signal.SIGKILL)
    editor.wait("require('heddle.client').get() == nil", "the daemon's exit")
    assert editor.transcript()[-1] == (
        "- the daemon exited (code 0, signal 9); the next prompt resumes this session")
    assert editor.status()["session_id"] == session_id


def test_the_daemon_starts_at_the_first_prompt_or_at_setup(
        editor, scripted: ScriptedServer, workspace: Path) -> None:
    scripted.add_scenario("chat", {"steps": [
        {"content": [{"type": "text", "text": "Ready when you were."}]}]})
    editor.setup(model="chat")  # would start the daemon within setup() itself
    assert editor.lua("return require('heddle.client').get() == nil"), "started without a prompt"

    editor.setup(model="chat", start="setup")
    editor.wait("require('heddle.client').get() ~= nil", "the daemon to start at setup()")
    started = editor.lua("return require('heddle.client').get().id")
    editor.cmd("AgentRun are you there?")
    editor.wait("require('heddle').status().last ~= nil", "the turn to end")
    status = editor.wait_idle()
    assert status["last"]["reason"] == "completed"
    assert any("Ready when you were." in line for line in editor.transcript())
    assert editor.lua("return require('heddle.client').get().id") == started
    assert editor.errors() == []
