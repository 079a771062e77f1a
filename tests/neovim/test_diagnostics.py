"""The buffer's diagnostics after the agent's edit: Neovim answers `diagnostics/list` from
`vim.diagnostic`, and the model reads the new problems in the edit's result. A linter written in
Lua here checks the buffer on every change and sets its diagnostics (no language server)."""

from __future__ import annotations

import re
from pathlib import Path

from heddle.scripted import ScriptedServer
from test_edits import scenario, text_of, tool_result, tool_use

LINT = """
local buf = vim.fn.bufnr(...)
local ns = vim.api.nvim_create_namespace('test-lint')
local function lint()
  local found = {}
  for i, line in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) do
    if line:find('foo') then
      found[#found + 1] = { lnum = i - 1, col = 4, severity = vim.diagnostic.severity.ERROR,
                            message = "undefined name 'foo'", source = 'test-lint' }
    end
    if line:find('print%(') then
      found[#found + 1] = { lnum = i - 1, col = 0, severity = vim.diagnostic.severity.WARN,
                            message = 'print found', source = 'test-lint', code = 'T201' }
    end
  end
  vim.diagnostic.set(ns, buf, found)
end
lint()
vim.api.nvim_buf_attach(buf, false, { on_lines = function() vim.schedule(lint) end })
"""


def test_the_model_reads_the_new_problems_of_its_edit(
        editor, scripted: ScriptedServer, workspace: Path) -> None:
    app = workspace / "app.py"
    app.write_text("def greet(name):\n    return name\n\n\nprint(greet('world'))\n")
    editor.cmd(f"edit {app}")
    editor.lua(LINT, str(app))
    assert editor.lua("return #vim.diagnostic.get(vim.fn.bufnr(...))", str(app)) == 1
    scripted.add_scenario("lint", scenario(tool_use(
        "Edit", path="app.py", old_string="return name", new_string="return foo")))
    editor.setup(model="lint")
    editor.answer(selects=["allowOnce"])

    editor.cmd("AgentRun greet foo")
    # (a fresh daemon's first model call waits for the SDK's warm-up: long on a loaded machine)
    assert editor.wait_idle(timeout=45)["last"]["reason"] == "completed"

    _, after_edit = scripted.requests_for("lint")
    result = tool_result(after_edit)
    assert not result.get("is_error")
    # the agent edited a file it had not read: the result says so (docs/tools.md)
    unread = r"\s*\(You had not read app\.py in this session: [^)]*\)"
    assert re.search(unread, text_of(result))
    # the warning was there before the edit: only the error is new
    assert re.sub(unread, "", text_of(result)) == (
        "Edited app.py (1 replacement).\n\n"
        "The editor now reports 1 new error in app.py:\n"
        "  line 2: error: undefined name 'foo' (test-lint)\n"
        "They were not there before this edit. Fix the ones your change caused, unless your "
        "next edits resolve them.")
    answer = editor.lua(
        "return require('heddle.diagnostics').list({ uri = vim.uri_from_fname(...) })", str(app))
    assert answer["generation"] >= 1 and answer["diagnostics"][0] == {
        "range": {"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 4}},
        "severity": 1, "message": "undefined name 'foo'", "source": "test-lint"}
    assert editor.lua("return require('heddle.diagnostics').list({ uri = 'file:///nowhere.py' })") \
        == {"diagnostics": []}
