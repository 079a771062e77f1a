"""The help file: valid for :helptags, and a tag for every command, option and API function."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import PLUGIN


def test_help_file_documents_every_command_option_and_function(editor, tmp_path: Path) -> None:
    docs = tmp_path / "docs" / "doc"
    docs.mkdir(parents=True)
    shutil.copy(PLUGIN / "doc" / "heddle.txt", docs)  # helptags writes next to the file

    editor.cmd(f"helptags {docs}")
    editor.cmd(f"set runtimepath+={docs.parent}")
    tags = {line.split("\t")[0] for line in (docs / "tags").read_text().splitlines()}

    commands = [name for name in editor.lua("return vim.tbl_keys(vim.api.nvim_get_commands({}))")
                if name.startswith("Agent")]
    assert sorted(commands) == ["AgentAccept", "AgentCancel", "AgentLog", "AgentNew", "AgentReject", "AgentRun",
                               "AgentTrust"]
    assert {":" + name for name in commands} <= tags
    options = {name.split(".")[0]
               for name in editor.lua("return vim.tbl_keys(require('heddle.config').checks)")}
    assert len(options) == 10
    assert {f"heddle-config-{name}" for name in options} <= tags
    functions = editor.lua("local fns = {} for k, v in pairs(require('heddle')) do"
                           " if type(v) == 'function' then fns[#fns + 1] = k end end return fns")
    assert len(functions) == 10
    assert {f"heddle.{name}()" for name in functions} <= tags
    editor.cmd("help :AgentRun")
    assert editor.lua("return vim.fn.expand('%:t')") == "heddle.txt"
