"""Heddle's config and state folders: the XDG variables when set, the XDG defaults otherwise,
and every part of the daemon that keeps files there asks the same module."""

from __future__ import annotations

from pathlib import Path

import pytest

from heddle.permissions.protected import protected
from heddle.rpc.server import HeddleServer
from heddle.sessions.transcript import sessions_dir
from heddle.settings import HookSettings, user_settings_path
from heddle.xdg import config_dir, state_dir


@pytest.fixture
def home(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    return tmp_path / "home"


def test_the_variables_decide_when_set(home):
    env = {"XDG_CONFIG_HOME": "/cfg", "XDG_STATE_HOME": "/st"}
    assert (config_dir(env), state_dir(env)) == (Path("/cfg/heddle"), Path("/st/heddle"))


@pytest.mark.parametrize("env", [{}, {"XDG_CONFIG_HOME": "", "XDG_STATE_HOME": ""}])
def test_the_defaults_are_the_xdg_ones_in_the_home_folder(home, env):
    assert config_dir(env) == home / ".config/heddle"
    assert state_dir(env) == home / ".local/state/heddle"


def test_without_a_mapping_this_process_environment_decides(home, monkeypatch):
    assert (config_dir(), state_dir()) == (home / ".config/heddle", home / ".local/state/heddle")
    monkeypatch.setenv("XDG_CONFIG_HOME", "/cfg")
    monkeypatch.setenv("XDG_STATE_HOME", "/st")
    assert (config_dir(), state_dir()) == (Path("/cfg/heddle"), Path("/st/heddle"))


def test_settings_transcripts_and_the_daemon_use_these_folders(home, tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path / "c"), "XDG_STATE_HOME": str(tmp_path / "s"),
           "HEDDLE_NO_TRANSCRIPTS": "1"}
    assert user_settings_path(env) == tmp_path / "c/heddle/settings.toml"
    assert sessions_dir(env) == tmp_path / "s/heddle/sessions"
    assert HeddleServer(env=env).state_sessions == tmp_path / "s/heddle/sessions"
    assert sessions_dir() == home / ".local/state/heddle/sessions"


def test_both_the_set_and_the_default_config_folder_are_protected(home, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "c"))
    ws = tmp_path / "ws"
    ws.mkdir()
    guard = protected(ws, None, HookSettings())
    assert guard.covers(tmp_path / "c/heddle/settings.toml")
    assert guard.covers(home / ".config/heddle/trusted-workspaces.json")
    assert not guard.covers(home / ".config/other/settings.toml")
