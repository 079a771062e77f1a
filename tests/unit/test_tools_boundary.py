"""The workspace boundary: every way out of the workspace is refused, unless a rule allows it."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import pytest

from heddle.core.tools import ToolContext, ToolError
from heddle.permissions.policy import PermissionPolicy
from heddle.tools.registry import builtin_tools

TOOLS = builtin_tools()
PATH_TOOLS = {  # a valid input for each tool that takes a path, minus the path
    "Read": {}, "Edit": {"old_string": "", "new_string": "x"}, "Write": {"content": "x"},
    "MultiEdit": {"edits": [{"old_string": "", "new_string": "x"}]}, "LS": {},
    "Glob": {"pattern": "*"}, "Grep": {"pattern": "x"},
}


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = (tmp_path / "ws").resolve()
    (root / "src").mkdir(parents=True)
    (root / "src/ok.py").write_text("ok\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    (tmp_path / "ws-evil").mkdir()  # shares the workspace's name as a prefix
    (tmp_path / "ws-evil/x.txt").write_text("x\n")
    (root / "link-file").symlink_to(outside / "secret.txt")
    (root / "link-dir").symlink_to(outside)
    (root / "dangling").symlink_to(outside / "new.txt")
    return root


ESCAPES = [
    "../outside/secret.txt",
    "src/../../outside/secret.txt",
    "{tmp}/outside/secret.txt",
    "{tmp}/ws-evil/x.txt",
    "link-file",
    "link-dir/secret.txt",
    "link-dir/../ws/src/../../outside",
    "dangling",
    "/etc/passwd",
    "~/.bashrc",
]


@pytest.mark.parametrize("tool", sorted(PATH_TOOLS))
@pytest.mark.parametrize("raw", ESCAPES)
def test_every_escape_is_refused_by_every_path_tool(ws, tool, raw):
    ctx = ToolContext(ws)
    path = raw.format(tmp=ws.parent)
    inp = msgspec.convert({"path": path, **PATH_TOOLS[tool]}, TOOLS[tool].input_type)
    with pytest.raises(ToolError, match="is outside the workspace"):
        TOOLS[tool].normalise(inp, ctx)


@pytest.mark.parametrize("tool", sorted(PATH_TOOLS))
def test_a_path_with_a_nul_is_a_clear_error_for_every_path_tool(ws, tool):
    inp = msgspec.convert({"path": "src/ok.py\0.txt", **PATH_TOOLS[tool]}, TOOLS[tool].input_type)
    with pytest.raises(ToolError, match="cannot contain a NUL character"):
        TOOLS[tool].normalise(inp, ToolContext(ws))


def test_inside_paths_resolve_to_absolute_symlink_free_paths(ws):
    ctx = ToolContext(ws)
    (ws / "inner-link").symlink_to(ws / "src")
    read = TOOLS["Read"]
    for raw in ("src/ok.py", "./src/../src/ok.py", str(ws / "src/ok.py"), "inner-link/ok.py"):
        inp = read.normalise(msgspec.convert({"path": raw}, read.input_type), ctx)
        assert inp.path == str(ws / "src/ok.py")


def test_a_rule_can_open_a_path_for_one_tool_family(ws):
    outside = ws.parent / "outside"
    policy = PermissionPolicy(allow=[f"Read({outside}/**)"], deny=[f"Read({outside}/secret.txt)"])
    ctx = ToolContext(ws, outside_allowed=lambda tool, path: policy.allows_outside(tool, path, ws))
    read, grep, edit = TOOLS["Read"], TOOLS["Grep"], TOOLS["Edit"]
    inp = read.normalise(msgspec.convert({"path": "link-dir/secret.txt"}, read.input_type), ctx)
    assert inp.path == str(outside / "secret.txt")
    # the boundary opened, but the deny rule still refuses this file
    assert policy.decide(read, inp, ctx).message.startswith("Read is denied by the rule")
    grep.normalise(msgspec.convert({"pattern": "x", "path": str(outside)}, grep.input_type), ctx)
    with pytest.raises(ToolError, match="outside the workspace"):
        edit.normalise(msgspec.convert({"path": str(outside / "a.txt"), "old_string": "",
                                        "new_string": "x"}, edit.input_type), ctx)
    bare = PermissionPolicy(allow=["Read"])  # a rule without a path never opens the boundary
    assert not bare.allows_outside("Read", outside / "secret.txt", ws)


def test_home_patterns_expand(ws):
    home_file = Path(os.path.expanduser("~/.heddle-test-nonexistent")).resolve()
    policy = PermissionPolicy(ask=["Read(~/.heddle-test-*)"])
    assert policy.allows_outside("Read", home_file, ws)


def test_read_may_use_this_sessions_saved_results_only(ws, tmp_path):
    state = tmp_path / "state/heddle"
    mine, other = state / "tool-results/s1", state / "tool-results/s2"
    for folder in (mine, other, state / "sessions"):
        folder.mkdir(parents=True)
    (mine / "t.txt").write_text("mine\n")
    (other / "t.txt").write_text("theirs\n")
    (state / "sessions/s2.jsonl").write_text("{}\n")
    (mine / "escape").symlink_to(other)
    ctx = ToolContext(ws, results_dir=mine)
    read = TOOLS["Read"]
    inp = read.normalise(msgspec.convert({"path": str(mine / "t.txt")}, read.input_type), ctx)
    assert inp.path == str((mine / "t.txt").resolve())
    for path in (other / "t.txt", state / "sessions/s2.jsonl", state / "sessions", mine / "..",
                 mine / "../s2/t.txt", mine / "escape/t.txt"):
        with pytest.raises(ToolError, match="is outside the workspace"):
            read.normalise(msgspec.convert({"path": str(path)}, read.input_type), ctx)
    for tool in ("Write", "Edit", "MultiEdit", "Grep", "Glob", "LS"):  # Read pages; others stay out
        inp = msgspec.convert({"path": str(mine / "t.txt"), **PATH_TOOLS[tool]},
                              TOOLS[tool].input_type)
        with pytest.raises(ToolError, match="is outside the workspace"):
            TOOLS[tool].normalise(inp, ctx)
