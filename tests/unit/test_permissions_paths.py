"""Path patterns of rules: globs over resolved absolute paths, and their edge cases."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from heddle.rules import path_matches

WS = Path("/ws")


@pytest.mark.parametrize("pattern,path,expected", [
    # `**` spans any number of folders, none included
    ("src/**", "/ws/src", True),
    ("src/**", "/ws/src/a", True),
    ("src/**", "/ws/src/a/b/c.py", True),
    ("src/**/test_*.py", "/ws/src/test_a.py", True),
    ("src/**/test_*.py", "/ws/src/a/b/test_a.py", True),
    ("**", "/ws", True),
    ("**", "/elsewhere/a", False),
    ("/**", "/any/thing", True),
    ("a**b", "/ws/a/b", False),  # not a whole segment: a plain `*`
    ("a**b", "/ws/axxb", True),
    # `*` and `?` stay within one name
    ("*", "/ws/a/b", False),
    ("*/b", "/ws/a/b", True),
    ("a?c", "/ws/abc", True),
    ("a?c", "/ws/a/c", False),
    # dotfiles are names like any other
    ("*", "/ws/.env", True),
    ("**/.env", "/ws/.env", True),
    ("**/*.py", "/ws/.venv/lib/x.py", True),
    ("src/**", "/ws/src/.hidden/x", True),
    # character classes, and `[` that opens none
    ("a[1].txt", "/ws/a1.txt", True),
    ("a[1].txt", "/ws/a[1].txt", False),
    ("a[[]1].txt", "/ws/a[1].txt", True),
    ("a\\[1\\].txt", "/ws/a[1].txt", True),
    ("*.txt", "/ws/a[1].txt", True),
    ("a[.txt", "/ws/a[.txt", True),
    ("a[!b].txt", "/ws/ac.txt", True),
    ("a[!b].txt", "/ws/ab.txt", False),
    ("[a-c]*", "/ws/beta", True),
    ("{a,b}", "/ws/a", False),  # no brace expansion: `{a,b}` is that name
    ("{a,b}", "/ws/{a,b}", True),
    # case counts
    ("*.PY", "/ws/a.py", False),
    ("README.md", "/ws/readme.md", False),
    # absolute patterns
    ("/etc/hosts", "/etc/hosts", True),
    ("/etc/*", "/etc/ssh/sshd_config", False),
])
def test_path_globs(pattern, path, expected):
    assert path_matches(pattern, Path(path), WS) is expected


def test_home_and_symlinks_resolve_and_special_characters_in_folders_are_literal(tmp_path,
                                                                                 monkeypatch):
    home = tmp_path / "home [me]*"
    (home / "notes").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    assert path_matches("~/notes/**", home / "notes/a.md", WS)
    assert path_matches("~", home, WS)
    assert not path_matches("~/notes/**", tmp_path / "home m/notes/a.md", WS)
    assert path_matches("~nosuchuser/x", WS / "~nosuchuser/x", WS)  # a name in the workspace

    ws = tmp_path / "w[s]?"
    (ws / "real").mkdir(parents=True)
    os.symlink(ws / "real", ws / "link")
    assert path_matches("src/*.py", ws / "src/a.py", ws)
    assert not path_matches("src/*.py", tmp_path / "wsx/src/a.py", ws)  # `w[s]?` is no glob
    assert path_matches("link/**", ws / "real/a.py", ws)  # the literal part is resolved
    assert not path_matches("link/**", ws / "link/a.py", ws)  # paths arrive resolved
    os.remove(ws / "link")
    (ws / "other").mkdir()
    os.symlink(ws / "other", ws / "link")  # a symlink changed meanwhile counts at once
    assert path_matches("link/**", ws / "other/a.py", ws)
    assert not path_matches("link/**", ws / "real/a.py", ws)
