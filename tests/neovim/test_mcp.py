"""A session's MCP server in Neovim: when it dies and is restarted, and when it fails for good,
the user is told with `vim.notify` (a warning, then an error), with the server's last stderr
lines — also when no turn runs."""

from __future__ import annotations

import sys
from pathlib import Path

from heddle.scripted import ScriptedServer

MCP_SERVER = Path(__file__).parents[1] / "e2e" / "mcp_server.py"
WARN, ERROR = 3, 4  # vim.log.levels


def test_a_dying_server_is_a_warning_and_its_failure_an_error(
        editor, scripted: ScriptedServer, workspace: Path, tmp_path: Path) -> None:
    settings = tmp_path / "xdg" / "config" / "heddle" / "settings.toml"
    settings.parent.mkdir(parents=True)
    # startup_timeout = 0: the session opens before the server's first start, so each of its
    # deaths (it exits at once, saying `not today`) comes after, while the session is idle
    settings.write_text(
        f'[mcp]\nstartup_timeout = 0\n\n[mcp.servers.srv]\ncommand = "{sys.executable}"\n'
        f'args = ["-I", "{MCP_SERVER}"]\nenv = {{ MCP_TEST_EXIT_AT_START = "1" }}\n')
    scripted.add_scenario("mcp", {"steps": [{"content": [{"type": "text", "text": "Hi."}]}]})
    editor.setup(model="mcp")
    editor.cmd("AgentRun hello")
    editor.wait_idle()

    editor.wait("vim.iter(T.notes):any(function(n) return n.level == vim.log.levels.ERROR end)",
                "the server's failure", timeout=40)

    said = [(n["message"], n["level"]) for n in editor.harness("notes")
            if "MCP server srv" in n["message"]]
    last = "\n  its last output:\n    not today"
    assert said == [
        (f"heddle: MCP server srv stopped (exited with code 7); restarting it in {delay} s "
         f"(restart {n} of 3).{last}", WARN) for n, delay in ((1, "0.5"), (2, "1"), (3, "2"))
    ] + [("heddle: MCP server srv failed (exited with code 7) and was restarted 3 times; it is "
          f"not restarted again, so its tools are not offered in this session.{last}", ERROR)]
