"""The help file: valid for :helptags, a tag for every command, option and API function, its
tags shipped and current; the lazy.nvim spec's way of loading the plugin."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pynvim

from conftest import PLUGIN, ROOT, _reap, nvim_binary


def test_help_file_documents_every_command_option_and_function(editor, tmp_path: Path) -> None:
    docs = tmp_path / "docs" / "doc"
    docs.mkdir(parents=True)
    shutil.copy(PLUGIN / "doc" / "heddle.txt", docs)  # helptags writes next to the file

    editor.cmd(f"helptags {docs}")
    editor.cmd(f"set runtimepath+={docs.parent}")
    tags = {line.split("\t")[0] for line in (docs / "tags").read_text().splitlines()}

    commands = [name for name in editor.lua("return vim.tbl_keys(vim.api.nvim_get_commands({}))")
                if name.startswith("Agent")]
    assert sorted(commands) == [
        "AgentAccept", "AgentCancel", "AgentLog", "AgentMode", "AgentModel", "AgentNew",
        "AgentReject", "AgentResume", "AgentRules", "AgentRun", "AgentSessions", "AgentToggle",
        "AgentTrust"]
    assert {":" + name for name in commands} <= tags
    options = {name.split(".")[0]
               for name in editor.lua("return vim.tbl_keys(require('heddle.config').checks)")}
    assert len(options) == 12
    assert {f"heddle-config-{name}" for name in options} <= tags
    functions = editor.lua("local fns = {} for k, v in pairs(require('heddle')) do"
                           " if type(v) == 'function' then fns[#fns + 1] = k end end return fns")
    assert len(functions) == 17
    assert {f"heddle.{name}()" for name in functions} <= tags
    editor.cmd("help :AgentRun")
    assert editor.lua("return vim.fn.expand('%:t')") == "heddle.txt"
    plugs = editor.lua("return vim.tbl_map(function(m) return m.lhs end, vim.api.nvim_get_keymap('n'))")
    plugs = {p for p in plugs if p.startswith("<Plug>(heddle-")}
    assert len(plugs) == 6
    help_text = (PLUGIN / "doc" / "heddle.txt").read_text()
    assert [p for p in plugs if p not in help_text] == []


def test_shipped_help_tags_are_current_and_help_works_without_helptags(
        editor, tmp_path: Path) -> None:
    docs = tmp_path / "fresh" / "doc"
    docs.mkdir(parents=True)
    shutil.copy(PLUGIN / "doc" / "heddle.txt", docs)
    subprocess.run([nvim_binary(), "--headless", "-u", "NONE", "-i", "NONE", "-n",
                    "-c", f"helptags {docs}", "-c", "qa!"], check=True, timeout=30,
                   stdin=subprocess.DEVNULL, capture_output=True)
    assert (PLUGIN / "doc" / "tags").read_text() == (docs / "tags").read_text(), \
        "doc/tags is stale: run  nvim --headless -c 'helptags clients/neovim/doc' -c q"
    # The fixture installed the plugin as a package and never ran :helptags.
    editor.cmd("help heddle")
    assert editor.lua("return vim.fn.expand('%:t')") == "heddle.txt"
    editor.cmd("help heddle-sessions")
    assert "SESSIONS AND RESUMING" in editor.lua("return vim.api.nvim_get_current_line()")


LAZY_INIT = """
local plugin = { dir = ... }
vim.g.heddle = { model = 'from-g-heddle', window = { layout = 'float' } }
-- the spec's init, as lazy.nvim calls it
vim.opt.rtp:prepend(plugin.dir .. '/clients/neovim')
vim.cmd.runtime('plugin/heddle.lua')
return {
  commands = vim.fn.exists(':AgentRun') == 2 and vim.fn.exists(':AgentSessions') == 2,
  model = require('heddle.config').options.model,
  layout = require('heddle.config').options.window.layout,
}
"""


def test_the_lazy_spec_loads_the_plugin_without_a_config_function(tmp_path: Path) -> None:
    """What the documented lazy.nvim spec does (its init, on a clone of the repository), in a
    Neovim that has no plugin installed; options come from vim.g.heddle, help from the
    shipped tags."""
    nvim = pynvim.attach("child", argv=["env", f"XDG_CONFIG_HOME={tmp_path}",
                                        f"XDG_DATA_HOME={tmp_path}", nvim_binary(), "--embed",
                                        "--headless", "-i", "NONE", "-n", "--clean"])
    pid = nvim.call("getpid")
    try:
        assert nvim.exec_lua("return vim.fn.exists(':AgentRun')") == 0
        got = nvim.exec_lua(LAZY_INIT, str(ROOT))
        assert got == {"commands": True, "model": "from-g-heddle", "layout": "float"}
        nvim.command("help :AgentResume")
        assert nvim.exec_lua("return vim.fn.expand('%:t')") == "heddle.txt"
    finally:
        try:
            nvim.command("qa!")
        except Exception:  # pynvim reports the child's exit as an error on this last request
            pass
        nvim.close()
        assert _reap([pid], time.monotonic() + 10) == []
