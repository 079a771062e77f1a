"""`:checkhealth heddle` against the real daemon."""

from __future__ import annotations

import sys
from pathlib import Path

import heddle
from heddle_protocol import PROTOCOL_VERSION
from heddle.tools.registry import builtin_tools


def health_report(editor) -> list[str]:
    editor.cmd("checkhealth heddle")
    lines = editor.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)")
    return lines[lines.index("Neovim ~"):]


def test_checkhealth_reports_a_working_setup(editor, workspace: Path) -> None:
    editor.setup(model="claude-sonnet-4-5", permission_mode="acceptEdits")
    version = editor.lua(
        "local v = vim.version() return ('%d.%d.%d'):format(v.major, v.minor, v.patch)")

    assert health_report(editor) == [
        "Neovim ~",
        f"- ✅ OK Neovim {version}",
        "",
        "Configuration ~",
        "- ✅ OK options are valid",
        f"- daemon command: {sys.executable} -I -m heddle serve",
        "- model: claude-sonnet-4-5",
        "- permission mode: acceptEdits",
        f"- workspace of new sessions: {workspace}",
        "",
        "Daemon ~",
        f"- ✅ OK `{sys.executable}` is {sys.executable}",
        f"- ✅ OK daemon {heddle.__version__} answered, protocol {PROTOCOL_VERSION}",
        f"- tools: {', '.join(builtin_tools())}",
        "",
    ]


def test_checkhealth_reports_bad_options_and_a_missing_daemon(editor) -> None:
    editor.lua("require('heddle').setup({ cmd = { 'heddle-not-installed', 'serve' },"
               " window = { position = 'middle' }, colour = 'blue' })")

    report = health_report(editor)

    assert report[report.index("Configuration ~") + 1:][:3] == [
        "- ❌ ERROR option `window.position` must be 'right', 'left', 'above' or 'below';"
        " using the default",
        "  - ADVICE:",
        "    - see :help |heddle-config|",
    ]
    assert "- ❌ ERROR unknown option `colour`" in report
    daemon = report[report.index("Daemon ~") + 1:]
    assert daemon[:4] == [
        "- ❌ ERROR `heddle-not-installed` is not an executable",
        "  - ADVICE:",
        "    - install Heddle from its repository (pip install /path/to/heddle) so that `heddle`"
        " is on $PATH",
        "    - or set `cmd`, e.g. { '/path/to/venv/bin/heddle', 'serve' }",
    ]
