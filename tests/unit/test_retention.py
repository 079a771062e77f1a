"""Saved tool results of long-idle sessions expire; everything else stays."""

import os
import time
from pathlib import Path

from heddle.sessions.retention import prune_tool_results

DAY = 86400


def saved(root: Path, session: str, age_days: float, name: str = "toolu_1.txt") -> Path:
    path = root / session / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("a long result")
    stamp = time.time() - age_days * DAY
    os.utime(path, (stamp, stamp))
    return path


def test_only_sessions_idle_longer_than_the_limit_go(tmp_path):
    root = tmp_path / "tool-results"
    saved(root, "old", 20)
    saved(root, "mixed", 30)
    saved(root, "mixed", 1, "toolu_2.txt")  # one recent result keeps the whole session
    saved(root, "fresh", 2)
    (root / "stray-file").write_text("not a session")
    assert prune_tool_results(root, 14) == 1
    assert sorted(p.name for p in root.iterdir()) == ["fresh", "mixed", "stray-file"]
    assert len(list((root / "mixed").iterdir())) == 2


def test_zero_days_keeps_everything_and_a_missing_root_is_fine(tmp_path):
    root = tmp_path / "tool-results"
    assert prune_tool_results(root, 14) == 0
    saved(root, "old", 400)
    assert prune_tool_results(root, 0) == 0
    assert (root / "old").is_dir()


def test_a_symlinked_directory_is_neither_followed_nor_removed(tmp_path):
    root = tmp_path / "tool-results"
    elsewhere = tmp_path / "project"
    kept = saved(elsewhere, "src", 100, "main.py")
    root.mkdir()
    (root / "link").symlink_to(elsewhere)
    assert prune_tool_results(root, 14) == 0
    assert kept.exists() and (root / "link").is_symlink()
