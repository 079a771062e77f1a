"""The agent's edits in Neovim: buffers are synced to the daemon, edits to open buffers go through
the editor (version-checked, saved per `save_after_edit`), edits are reviewed hunk by hunk, and
buffers of files written to disk are reloaded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from heddle.scripted import ScriptedServer


def tool_use(name: str, **tool_input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "name": name, "input": tool_input}


def scenario(*tools: dict[str, Any]) -> dict[str, Any]:
    steps: list[dict[str, Any]] = [{"content": [tool]} for tool in tools]
    return {"steps": [*steps, {"content": [{"type": "text", "text": "Done."}]}]}


def tool_result(request: Any) -> dict[str, Any]:
    [block] = [b for b in request.body["messages"][-1]["content"]
               if isinstance(b, dict) and b["type"] == "tool_result"]
    return block


def text_of(block: dict[str, Any]) -> str:
    content = block["content"]
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


def numbered(count: int) -> list[str]:
    return [f"line {i}" for i in range(1, count + 1)]


def text(lines: list[str]) -> str:
    return "".join(f"{line}\n" for line in lines)


def buffer_lines(editor, path: Path) -> list[str]:
    return editor.lua("return vim.api.nvim_buf_get_lines(vim.fn.bufnr(...), 0, -1, false)",
                      str(path))


def modified(editor, path: Path) -> bool:
    return editor.lua("return vim.bo[vim.fn.bufnr(...)].modified", str(path))


def attached(editor, path: Path) -> list[str]:
    return editor.lua("local buf = vim.fn.bufnr(...) return vim.tbl_map(function(c) "
                      "return c.name end, vim.lsp.get_clients({ bufnr = buf }))", str(path))


SIGNS = """
local r = require('heddle.review').active()
local buf = r[...]
local ns = vim.api.nvim_get_namespaces()['heddle.review']
local out = {}
for _, m in ipairs(vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, { details = true })) do
  local d = m[4]
  if d.sign_text then
    out[#out + 1] = { m[2] + 1, vim.trim(d.sign_text), d.sign_hl_group, d.virt_text[1][1] }
  end
end
return out
"""


def test_buffers_are_synced_and_reads_see_unsaved_text(
        editor, scripted: ScriptedServer, workspace: Path) -> None:
    # Opened and changed before the daemon starts; the daemon still gets the buffer's text.
    app = workspace / "app.py"
    app.write_text("x = 1\n")
    editor.cmd(f"edit {app}")
    editor.lua("vim.api.nvim_buf_set_lines(0, 0, -1, false, { 'x = 99  # unsaved' })")
    scripted.add_scenario("read", scenario(tool_use("Read", path="app.py")))
    editor.setup(model="read")

    editor.cmd("AgentRun what is x?")
    assert editor.wait_idle()["last"]["reason"] == "completed"

    assert attached(editor, app) == ["heddle"]
    # Only files: the transcript is not a document of the daemon.
    assert editor.lua("return #vim.lsp.get_clients({ bufnr = require('heddle').status().buf })") == 0
    # Opened after the daemon started: attached too.
    other = workspace / "other.py"
    other.write_text("y = 2\n")
    editor.cmd(f"edit {other}")
    assert attached(editor, other) == ["heddle"]
    # Not a language server: nothing of vim.lsp's per-client setup took the buffer.
    assert editor.lua("local bo = vim.bo[vim.fn.bufnr(...)] "
                      "return { bo.omnifunc, bo.tagfunc, bo.formatexpr }", str(app)) == ["", "", ""]
    assert editor.lua("return vim.fn.maparg('K', 'n', false, true).buffer") is None
    _, after_read = scripted.requests_for("read")
    assert "x = 99  # unsaved" in text_of(tool_result(after_read))
    assert app.read_text() == "x = 1\n"


@pytest.mark.parametrize(("dirty", "mode", "saved"), [
    (True, "if_clean", False),
    (True, "always", True),
    (False, "if_clean", True),
    (False, "never", False),
])
def test_an_edit_of_an_open_buffer_keeps_unsaved_work_and_saves_per_setting(
        editor, scripted: ScriptedServer, workspace: Path,
        dirty: bool, mode: str, saved: bool) -> None:
    original = numbered(12)
    app = workspace / "app.py"
    app.write_text(text(original))
    editor.cmd(f"edit {app}")
    expected = list(original)
    if dirty:
        # The user's unsaved change at the top; the agent edits the bottom.
        editor.lua("vim.api.nvim_buf_set_lines(0, 0, 1, false, { 'line 1 (mine)' })")
        expected[0] = "line 1 (mine)"
    scripted.add_scenario("edit", scenario(
        tool_use("Edit", path="app.py", old_string="line 11", new_string="line 11 (agent)")))
    editor.setup(model="edit", save_after_edit=mode)
    editor.answer(selects=["allowOnce"])

    editor.cmd("AgentRun change line 11")
    assert editor.wait_idle()["last"]["reason"] == "completed"

    expected[10] = "line 11 (agent)"
    assert buffer_lines(editor, app) == expected
    assert modified(editor, app) is not saved
    assert app.read_text() == text(expected if saved else original)
    [asked] = editor.harness("selects")
    assert asked["review"]["open"] and asked["review"]["diff"]
    _, after_edit = scripted.requests_for("edit")
    assert not tool_result(after_edit).get("is_error"), text_of(tool_result(after_edit))
    # Undo takes the agent's edit back and leaves the user's change.
    editor.cmd("undo")
    assert buffer_lines(editor, app) == (["line 1 (mine)", *original[1:]] if dirty else original)


def test_a_buffer_changed_while_the_prompt_is_open_is_not_clobbered(
        editor, scripted: ScriptedServer, workspace: Path) -> None:
    app = workspace / "app.py"
    app.write_text(text(numbered(5)))
    editor.cmd(f"edit {app}")
    scripted.add_scenario("stale", scenario(
        tool_use("Edit", path="app.py", old_string="line 3", new_string="line 3 (agent)")))
    editor.setup(model="stale")
    editor.answer(selects=["hold"])

    editor.cmd("AgentRun change line 3")
    editor.wait("T.choose ~= nil", "the permission prompt")
    # The user edits the very line the agent is about to change, then allows the edit.
    editor.lua("vim.api.nvim_buf_set_lines(vim.fn.bufnr(...), 2, 3, false, { 'line 3 (mine)' })",
               str(app))
    editor.lua("T.choose('allowOnce')")
    assert editor.wait_idle()["last"]["reason"] == "completed"

    mine = ["line 1", "line 2", "line 3 (mine)", "line 4", "line 5"]
    assert buffer_lines(editor, app) == mine
    assert app.read_text() == text(numbered(5))
    _, after_edit = scripted.requests_for("stale")
    result = tool_result(after_edit)
    assert result.get("is_error") is True
    assert "the file changed in the editor since the agent read it" in text_of(result)


def test_hunks_are_accepted_and_rejected_in_the_review(
        editor, scripted: ScriptedServer, workspace: Path) -> None:
    original = numbered(30)
    proposed = list(original)
    proposed[1], proposed[14], proposed[27] = "line 2 (a)", "line 15 (b)", "line 28 (c)"
    notes = workspace / "notes.txt"
    notes.write_text(text(original))
    scripted.add_scenario("hunks", scenario(
        tool_use("Read", path="notes.txt"),
        tool_use("Write", path="notes.txt", content=text(proposed))))
    editor.setup(model="hunks")
    editor.answer(selects=["review"], inputs=["keep line 15 as it is"])

    editor.cmd("AgentRun rewrite the notes")
    editor.wait("require('heddle.review').active() ~= nil", "the review")
    [asked] = editor.harness("selects")
    # The diff was on screen when the picker asked, with the extra choice to review it.
    assert asked["review"]["open"] and asked["review"]["diff"]
    assert asked["review"]["proposal"] == proposed
    assert asked["items"][-1] == "Review in the diff (hunk by hunk, or edit it)"
    # Accept the first hunk, reject the second with a message; the third stays pending.
    editor.cmd("call cursor(2, 1)")
    editor.cmd("normal ga")
    editor.cmd("call cursor(15, 1)")
    editor.cmd("normal gr")
    assert editor.harness("inputs") == [{"prompt": "Why reject hunk 2? (optional): "}]
    # Each hunk's changed line shows its state, in colour, on both sides.
    assert editor.lua(SIGNS, "proposal") == [
        [2, "✓", "HeddleHunkAccepted", "hunk 1/3: accepted"],
        [15, "✗", "HeddleHunkRejected", "hunk 2/3: rejected — keep line 15 as it is"],
        [28, "?", "HeddleHunkPending", "hunk 3/3: pending (accepted unless rejected)"]]
    assert [row for row, *_ in editor.lua(SIGNS, "before")] == [2, 15, 28]
    editor.cmd("AgentAccept")
    assert editor.wait_idle()["last"]["reason"] == "completed"

    written = list(proposed)
    written[14] = "line 15"
    assert notes.read_text() == text(written)
    assert editor.lua("return require('heddle.review').active() == nil") is True
    assert editor.lua("return #vim.api.nvim_list_tabpages()") == 1
    *_, after_write = scripted.requests_for("hunks")
    told = text_of(tool_result(after_write))
    assert 'Rejected: hunk 2 of 3 (lines 12-18), the user said: "keep line 15 as it is"' in told
    assert "Applied: hunk 1 of 3" in told
    assert "line 15 (b)" in told  # the diff from the proposal to what was written


def test_the_users_own_text_in_the_review_is_what_lands(
        editor, scripted: ScriptedServer, workspace: Path) -> None:
    app = workspace / "app.py"
    app.write_text("x = 1\ny = 2\n")
    editor.cmd(f"edit {app}")
    scripted.add_scenario("final", scenario(
        tool_use("Edit", path="app.py", old_string="x = 1", new_string="x = 2")))
    editor.setup(model="final")
    editor.answer(selects=["review"])

    editor.cmd("AgentRun bump x")
    editor.wait("require('heddle.review').active() ~= nil", "the review")
    editor.lua("local r = require('heddle.review').active() "
               "vim.api.nvim_buf_set_lines(r.proposal, 0, 1, false, { 'x = 42  # mine' })")
    editor.cmd("AgentAccept")
    assert editor.wait_idle()["last"]["reason"] == "completed"

    assert buffer_lines(editor, app) == ["x = 42  # mine", "y = 2"]
    assert app.read_text() == "x = 42  # mine\ny = 2\n"
    _, after_edit = scripted.requests_for("final")
    result = tool_result(after_edit)
    assert not result.get("is_error")
    assert "the user's own version" in text_of(result)
    assert "+x = 42  # mine" in text_of(result)


@pytest.mark.parametrize("how", ["AgentReject", "gR then AgentAccept"])
def test_rejecting_the_whole_review_tells_the_model(
        editor, scripted: ScriptedServer, workspace: Path, how: str) -> None:
    app = workspace / "app.py"
    app.write_text("x = 1\n")
    scripted.add_scenario("reject", scenario(
        tool_use("Edit", path="app.py", old_string="x = 1", new_string="x = 2")))
    editor.setup(model="reject")
    editor.answer(selects=[None], inputs=["x stays 1"])  # dismissing the picker keeps the review

    editor.cmd("AgentRun bump x")
    editor.wait("require('heddle.review').active() ~= nil and T.selects[1] ~= nil", "the review")
    if how == "AgentReject":
        editor.cmd("AgentReject")
    else:
        editor.cmd("normal gR")  # every hunk rejected is the edit rejected
        editor.cmd("AgentAccept")
    assert editor.wait_idle()["last"]["reason"] == "completed"

    assert app.read_text() == "x = 1\n"
    _, after_edit = scripted.requests_for("reject")
    result = tool_result(after_edit)
    assert result.get("is_error") is True
    if how == "AgentReject":
        assert "x stays 1" in text_of(result)


def test_a_buffer_is_reloaded_after_a_command_writes_its_file(
        editor, scripted: ScriptedServer, workspace: Path) -> None:
    app = workspace / "app.py"
    app.write_text("x = 1\n")
    editor.cmd(f"edit {app}")
    scripted.add_scenario("sed", scenario(tool_use("Bash", command="sed -i 's/1/2/' app.py",
                                                   description="Bump x with sed")))
    editor.setup(model="sed")
    editor.answer(selects=["allowOnce"])

    editor.cmd("AgentRun bump x with sed")
    assert editor.wait_idle()["last"]["reason"] == "completed"

    assert app.read_text() == "x = 2\n"
    # A command is asked about as before: no review, no review choice.
    [asked] = editor.harness("selects")
    assert asked["review"] == {"open": False}
    assert asked["items"][-1] == "Reject"
    assert asked["prompt"] == "Heddle: Run: sed -i 's/1/2/' app.py"  # the command is asked about
    assert "- ✓ Bump x with sed — exit 0" in editor.transcript()  # the call's title
    editor.wait(f"vim.api.nvim_buf_get_lines(vim.fn.bufnr('{app}'), 0, -1, false)[1] == 'x = 2'",
                "the buffer to be reloaded")
    assert modified(editor, app) is False


def test_two_edits_in_a_row_of_an_open_buffer_both_land(
        editor, scripted: ScriptedServer, workspace: Path) -> None:
    # The second edit is computed from the text the first one left, at its version: the daemon
    # must hear the buffer's change before it hears the first edit applied.
    app = workspace / "app.py"
    app.write_text("x = 1\ny = 1\n")
    editor.cmd(f"edit {app}")
    scripted.add_scenario("twice", scenario(
        tool_use("Edit", path="app.py", old_string="x = 1", new_string="x = 2"),
        tool_use("Edit", path="app.py", old_string="y = 1", new_string="y = 2")))
    editor.setup(model="twice", permission_mode="acceptEdits")

    editor.cmd("AgentRun bump both")
    assert editor.wait_idle()["last"]["reason"] == "completed"

    _, after_first, after_second = scripted.requests_for("twice")
    for request in (after_first, after_second):
        assert not tool_result(request).get("is_error"), text_of(tool_result(request))
    assert buffer_lines(editor, app) == ["x = 2", "y = 2"]
    assert app.read_text() == "x = 2\ny = 2\n"


def test_a_review_the_daemon_stopped_waiting_for_closes_and_the_next_edit_is_reviewed(
        editor, scripted: ScriptedServer, workspace: Path) -> None:
    app = workspace / "app.py"
    app.write_text("x = 1\ny = 1\n")
    scripted.add_scenario("timeout", scenario(
        tool_use("Edit", path="app.py", old_string="x = 1", new_string="x = 2"),
        tool_use("Edit", path="app.py", old_string="y = 1", new_string="y = 2")))
    editor.setup(model="timeout", cmd_env={"HEDDLE_PERMISSION_TIMEOUT": "1"})
    # The first edit is left in review, unanswered; the second is allowed from the picker.
    editor.answer(selects=["review", "allowOnce"])

    editor.cmd("AgentRun bump both")
    assert editor.wait_idle()["last"]["reason"] == "completed"

    first, second = editor.harness("selects")
    assert second["review"]["open"] and second["review"]["proposal"] == ["x = 1", "y = 2"]
    assert app.read_text() == "x = 1\ny = 2\n"
    assert editor.lua("return require('heddle.review').active() == nil") is True


def test_an_allowed_edit_of_a_file_without_a_final_newline_lands_as_proposed(
        editor, scripted: ScriptedServer, workspace: Path) -> None:
    app = workspace / "app.py"
    app.write_text("x = 1")
    scripted.add_scenario("noeol", scenario(
        tool_use("Edit", path="app.py", old_string="x = 1", new_string="x = 2")))
    editor.setup(model="noeol")
    editor.answer(selects=["allowOnce"])

    editor.cmd("AgentRun bump x")
    assert editor.wait_idle()["last"]["reason"] == "completed"

    assert app.read_text() == "x = 2"
    _, after_edit = scripted.requests_for("noeol")
    assert "own version" not in text_of(tool_result(after_edit))


def test_cancelling_the_turn_closes_the_review(
        editor, scripted: ScriptedServer, workspace: Path) -> None:
    app = workspace / "app.py"
    app.write_text("x = 1\n")
    scripted.add_scenario("cancel", scenario(
        tool_use("Edit", path="app.py", old_string="x = 1", new_string="x = 2")))
    editor.setup(model="cancel")
    editor.answer(selects=["review"])

    editor.cmd("AgentRun bump x")
    editor.wait("require('heddle.review').active() ~= nil", "the review")
    editor.cmd("AgentCancel")
    assert editor.wait_idle()["last"]["reason"] == "cancelled"

    assert editor.lua("return require('heddle.review').active() == nil") is True
    assert editor.lua("return #vim.api.nvim_list_tabpages()") == 1
    assert app.read_text() == "x = 1\n"


def test_the_stock_picker_asks_once_the_review_is_drawn(
        editor, scripted: ScriptedServer, workspace: Path) -> None:
    app = workspace / "app.py"
    app.write_text("x = 1\n")
    scripted.add_scenario("stock", scenario(
        tool_use("Edit", path="app.py", old_string="x = 1", new_string="x = 2")))
    editor.setup(model="stock")
    # Neovim's own vim.ui.select (inputlist); the user types 1, "Allow once".
    editor.lua("""vim.ui.select = function(items, opts, on_choice)
      T.seen = T.review()
      vim.api.nvim_feedkeys('1\\r', 'n', false)
      return T.stock_select(items, opts, on_choice)
    end""")

    editor.cmd("AgentRun bump x")
    assert editor.wait_idle()["last"]["reason"] == "completed"

    assert editor.harness("seen")["open"] is True
    assert app.read_text() == "x = 2\n"


def test_a_buffer_wiped_out_is_closed_for_the_daemon(
        editor, scripted: ScriptedServer, workspace: Path) -> None:
    app = workspace / "app.py"
    app.write_text("x = 1\n")
    editor.cmd(f"edit {app}")
    editor.lua("vim.api.nvim_buf_set_lines(0, 0, -1, false, { 'x = 99' })")
    done = {"content": [{"type": "text", "text": "Done."}]}
    scripted.add_scenario("close", {"steps": [
        {"content": [tool_use("Read", path="app.py")]}, done,
        # what the agent read is gone with the buffer: it reads the file again (an edit of
        # what it read would be refused as changed since)
        {"content": [tool_use("Read", path="app.py")]},
        {"content": [tool_use("Edit", path="app.py", old_string="x = 1", new_string="x = 2")]},
        done]})
    editor.setup(model="close", permission_mode="acceptEdits")
    editor.cmd("AgentRun read app.py")
    assert editor.wait_idle()["last"]["reason"] == "completed"

    # The user throws the unsaved change away; the agent's next edit is of the file on disk.
    editor.cmd(f"bwipeout! {app}")
    editor.cmd("AgentRun bump x")
    assert editor.wait_idle()["last"]["reason"] == "completed"

    _, after_read, _, after_reread, after_edit = scripted.requests_for("close")
    assert "x = 99" in text_of(tool_result(after_read))
    assert "x = 1" in text_of(tool_result(after_reread))  # the disk's text now
    result = tool_result(after_edit)
    assert not result.get("is_error"), text_of(result)
    assert app.read_text() == "x = 2\n"


def test_an_edit_after_wide_characters_lands_where_it_should(
        editor, scripted: ScriptedServer, workspace: Path) -> None:
    # Positions are UTF-16 (what the plugin asks for): a line of emoji and accents before and
    # after the edit, in a buffer with an unsaved change, all stay as they were.
    app = workspace / "app.py"
    app.write_text("s = 'héllo 😀'\nx = 1\nt = '日本'")
    editor.cmd(f"edit {app}")
    editor.lua("vim.api.nvim_buf_set_lines(0, 0, 1, false, { \"s = 'héllo 😀😀'\" })")
    scripted.add_scenario("wide", scenario(
        tool_use("Edit", path="app.py", old_string="t = '日本'", new_string="t = '日本語'")))
    editor.setup(model="wide", permission_mode="acceptEdits")

    editor.cmd("AgentRun extend t")
    assert editor.wait_idle()["last"]["reason"] == "completed"

    assert editor.lua("return vim.lsp.get_clients({ name = 'heddle' })[1].offset_encoding") \
        == "utf-16"
    assert buffer_lines(editor, app) == ["s = 'héllo 😀😀'", "x = 1", "t = '日本語'"]
