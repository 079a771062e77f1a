"""Shared fixtures: the scripted model server, sample workspaces, and daemons over real stdio."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from heddle.scripted import ScriptedServer

ROOT = Path(__file__).resolve().parents[1]
RETRY_DELAY = 0.02
"""Seconds before a daemon's first retry of a model request in these tests."""


@pytest.fixture
def scripted() -> ScriptedServer:
    """A scripted model server on a free loopback port, for this test only."""
    server = ScriptedServer()
    with server.run_in_thread() as running:
        yield running


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "app.py").write_text(
        "def greet(name):\n    return 'Hello, ' + name\n\n\nprint(greet('world'))\n")
    (ws / "README.md").write_text("# Sample\n\nA tiny project.\n")
    return ws


@pytest.fixture
def daemon_env(scripted: ScriptedServer, tmp_path: Path) -> dict[str, str]:
    """Environment for a daemon that talks to the scripted server and keeps state in tmp."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "HEDDLE_"))}
    env.update(
        ANTHROPIC_BASE_URL=scripted.url, ANTHROPIC_API_KEY="test-key",
        XDG_STATE_HOME=str(tmp_path / "state"), XDG_CONFIG_HOME=str(tmp_path / "config"),
        HEDDLE_LOG_LEVEL="DEBUG",
        HEDDLE_LOG_FILE=str(tmp_path / "heddle.log"),
        # retries back off from RETRY_DELAY, not 0.5 s: a model call that fails for good
        # takes 0.3 s, not 6.6 s (tests/e2e/test_loop.py checks the doubling)
        HEDDLE_RETRY_DELAY=str(RETRY_DELAY))
    return env


@pytest.fixture
def daemon_command() -> list[str]:
    # -I: as every launch of the daemon, immune to modules in the folder it runs in
    return [sys.executable, "-I", "-m", "heddle", "serve"]


SHADOWING = ("json", "msgspec", "anyio", "anthropic", "aiohttp", "lsprotocol", "asyncio",
             "logging", "typing")
"""Modules the daemon imports, and the ones a project is likely to have a file of."""


@pytest.fixture
def shadowed_workspace(workspace: Path) -> Path:
    """The sample workspace, plus files and folders named like what Heddle imports: a process
    that imports any of them from the workspace stops and says which."""
    for name in SHADOWING:
        (workspace / f"{name}.py").write_text(f"raise SystemExit('this is the project {name}.py')\n")
    for package in ("heddle", "heddle_protocol", "pygls"):
        (workspace / package).mkdir()
        (workspace / package / "__init__.py").write_text(
            f"raise SystemExit('this is the project {package}/')\n")
    return workspace
