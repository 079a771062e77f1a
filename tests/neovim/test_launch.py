"""The plugin's default `cmd` (the `heddle` console script) in a workspace whose files are
named like the daemon's modules: the daemon it starts there imports the real ones."""

from __future__ import annotations

import sys
from pathlib import Path

from heddle.scripted import ScriptedServer


def test_the_default_cmd_runs_a_turn_in_a_shadowing_workspace(
        editor, scripted: ScriptedServer, shadowed_workspace: Path) -> None:
    scripted.add_scenario("launch", {"steps": [
        {"content": [{"type": "text", "text": "The daemon imported the real modules."}]}]})
    # Installed Heddle puts `heddle` on PATH; here it is the checkout's venv.
    editor.lua("vim.env.PATH = ... .. ':' .. vim.env.PATH", str(Path(sys.executable).parent))
    options = {key: value for key, value in editor.base.items() if key != "cmd"}
    editor.lua("require('heddle').setup(...)", {**options, "model": "launch"})
    assert editor.lua("return require('heddle.config').options.cmd") == ["heddle", "serve"]

    editor.cmd("AgentRun hello")

    last = editor.wait_idle()["last"]
    assert last.get("reason") == "completed", last
    assert "The daemon imported the real modules." in editor.transcript()
