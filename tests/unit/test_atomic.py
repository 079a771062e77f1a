"""The one atomic write: exact content, the target's mode kept, symlinks followed only where
asked (the user's own files) and replaced where not (tools), nothing left behind on failure."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import msgspec
import pytest

from heddle.atomic import write_atomic
from heddle import trust_store
from heddle.core.tools import Seen, ToolContext
from heddle.tools.reads import fingerprint
from heddle.tools.registry import builtin_tools

TOOLS = builtin_tools()


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("follow", [True, False])
def test_a_new_file_gets_exactly_the_content_and_its_folders(tmp_path, follow):
    path = tmp_path / "a" / "b" / "new.txt"
    write_atomic(path, "one\r\ntwo\n\u00e9", follow_symlinks=follow)
    assert path.read_bytes() == "one\r\ntwo\n\u00e9".encode()
    assert mode(path) == 0o600 and leftovers(path.parent) == []
    write_atomic(path, b"\x00bytes", follow_symlinks=follow)
    assert path.read_bytes() == b"\x00bytes"


def test_a_new_project_file_gets_the_mode_the_umask_gives(tmp_path):
    old = os.umask(0o027)
    try:
        write_atomic(tmp_path / "made.py", "x = 1\n", follow_symlinks=False, private=False)
    finally:
        os.umask(old)
    assert mode(tmp_path / "made.py") == 0o640 and leftovers(tmp_path) == []


@pytest.mark.parametrize("follow", [True, False])
def test_an_existing_file_keeps_its_mode(tmp_path, follow):
    path = tmp_path / "run.sh"
    path.write_text("old")
    path.chmod(0o751)
    write_atomic(path, "new", follow_symlinks=follow)
    assert (path.read_text(), mode(path)) == ("new", 0o751)


def test_following_writes_through_the_link_to_its_target(tmp_path):
    (tmp_path / "dotfiles").mkdir()
    real = tmp_path / "dotfiles" / "settings.toml"
    real.write_text("old")
    real.chmod(0o644)
    link = tmp_path / "settings.toml"
    link.symlink_to(real)
    write_atomic(link, "new", follow_symlinks=True)
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert (real.read_text(), mode(real)) == ("new", 0o644)
    assert leftovers(tmp_path) == [] and leftovers(real.parent) == []


def test_following_a_dangling_link_creates_its_target(tmp_path):
    real = tmp_path / "dotfiles" / "trust.json"
    link = tmp_path / "trust.json"
    link.symlink_to(real)
    write_atomic(link, "{}", follow_symlinks=True)
    assert link.is_symlink() and real.read_text() == "{}"


def test_not_following_replaces_the_link_and_leaves_its_target(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    outside.chmod(0o644)
    link = tmp_path / "ws.txt"
    link.symlink_to(outside)
    write_atomic(link, "new", follow_symlinks=False)
    assert not link.is_symlink() and link.read_text() == "new"
    assert outside.read_text() == "keep" and mode(link) == 0o600  # not the link's 0777


@pytest.mark.parametrize("follow", [True, False])
def test_a_failed_write_leaves_no_temporary_file(tmp_path, follow):
    folder = tmp_path / "folder"
    (folder / "inside").mkdir(parents=True)
    with pytest.raises(OSError):
        write_atomic(folder, "x", follow_symlinks=follow)  # a folder cannot be replaced by a file
    assert folder.is_dir() and leftovers(tmp_path) == []


async def test_a_tool_writes_the_path_it_was_allowed_not_a_link_made_since(tmp_path):
    ws = (tmp_path / "ws").resolve()
    ws.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("one\n")
    ctx = ToolContext(ws)
    calls = {"Write": {"path": "a.txt", "content": "new\n"},
             "Edit": {"path": "a.txt", "old_string": "one", "new_string": "two"},
             "MultiEdit": {"path": "a.txt", "edits": [{"old_string": "one", "new_string": "2"}]}}
    for name, raw in calls.items():
        (ws / "a.txt").write_text("one\n")
        tool = TOOLS[name]
        inp = tool.normalise(msgspec.convert(raw, tool.input_type), ctx)  # checked here
        ctx.seen[ws / "a.txt"] = Seen(fingerprint("one\n"), "disk", "read")  # Write needs it
        (ws / "a.txt").unlink()
        (ws / "a.txt").symlink_to(outside)
        await tool.run(inp, ctx)
        assert outside.read_text() == "one\n", name
        assert not (ws / "a.txt").is_symlink(), name


async def test_write_and_edit_keep_an_executable_script_executable(tmp_path):
    ws = tmp_path.resolve()
    script = ws / "run.sh"
    script.write_text("echo one\n")
    script.chmod(0o755)
    ctx = ToolContext(ws)
    edit = TOOLS["Edit"]
    await edit.run(edit.normalise(msgspec.convert(
        {"path": "run.sh", "old_string": "one", "new_string": "two"}, edit.input_type), ctx), ctx)
    assert (script.read_text(), mode(script)) == ("echo two\n", 0o755)


def test_the_trust_record_is_written_through_a_symlinked_file(tmp_path):
    real = tmp_path / "dotfiles" / "trusted-workspaces.json"
    real.parent.mkdir()
    real.write_text("{}")
    store = tmp_path / "config" / "heddle" / trust_store.TRUST_FILE
    store.parent.mkdir(parents=True)
    store.symlink_to(real)
    trust_store.record(store, tmp_path, "ab" * 32)
    assert store.is_symlink()
    assert trust_store.trusted_digest(real, tmp_path) == "ab" * 32
