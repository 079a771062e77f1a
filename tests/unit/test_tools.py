"""Each tool's happy path and its errors, and permission rule matching."""

from __future__ import annotations

import time
from pathlib import Path

import msgspec
import pytest

from heddle.core.tools import ToolContext, ToolError
from heddle.permissions.policy import Allow, Ask, Deny, PermissionPolicy, rule_matches
from heddle.tools.base import schema_of
from heddle.tools.files import Edit, Read
from heddle.tools.search import Grep
from heddle.tools.shell import Bash, BashInput


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    (tmp_path / "a.py").write_text("one\ntwo\nthree\ntwo\n")
    return ToolContext(tmp_path.resolve())


def norm(tool, ctx, **raw):
    return tool.normalise(msgspec.convert(raw, tool.input_type), ctx)


async def test_read_numbers_lines_and_pages(ctx):
    out = await Read().run(norm(Read(), ctx, path="a.py", offset=2, limit=2), ctx)
    assert out.content.splitlines()[:2] == ["     2\ttwo", "     3\tthree"]
    assert "read on with offset=4" in out.content


async def test_read_refuses_binaries_missing_files_and_escapes(ctx):
    (ctx.workspace / "bin").write_bytes(b"\x00\x01\x02")
    with pytest.raises(ToolError, match="binary"):
        await Read().run(norm(Read(), ctx, path="bin"), ctx)
    with pytest.raises(ToolError, match="does not exist"):
        await Read().run(norm(Read(), ctx, path="nope.py"), ctx)
    with pytest.raises(ToolError, match="outside the workspace"):
        norm(Read(), ctx, path="/etc/passwd")
    (ctx.workspace / "link").symlink_to("/etc")
    with pytest.raises(ToolError, match="outside the workspace"):
        norm(Read(), ctx, path="link/passwd")


async def test_edit_unique_match_replace_all_and_errors(ctx):
    edit = Edit()
    with pytest.raises(ToolError, match="occurs 2 times"):
        await edit.run(norm(edit, ctx, path="a.py", old_string="two", new_string="2"), ctx)
    with pytest.raises(ToolError, match="was not found"):
        await edit.run(norm(edit, ctx, path="a.py", old_string="four", new_string="4"), ctx)
    out = await edit.run(norm(edit, ctx, path="a.py", old_string="two", new_string="2",
                              replace_all=True), ctx)
    assert out.summary == "2 replacements"
    assert (ctx.workspace / "a.py").read_text() == "one\n2\nthree\n2\n"
    assert "-two\n+2\n" in out.diff
    created = await edit.run(norm(edit, ctx, path="new/b.py", old_string="", new_string="x\n"), ctx)
    assert created.summary == "created" and (ctx.workspace / "new/b.py").read_text() == "x\n"


async def test_edit_preview_is_a_diff_and_changes_nothing(ctx):
    inp = norm(Edit(), ctx, path="a.py", old_string="one", new_string="uno")
    preview = await Edit().preview(inp, ctx)
    assert "-one\n+uno\n" in preview.diff
    assert (ctx.workspace / "a.py").read_text().startswith("one")


async def test_bash_exit_code_output_and_timeout(ctx):
    out = await Bash().run(BashInput("echo hi; exit 3"), ctx)
    assert out.content == "Exit code 3\nhi\n" and out.summary == "exit 3"
    started = time.monotonic()
    slow = await Bash().run(BashInput("sleep 30", timeout=1000), ctx)
    assert slow.is_error and "timed out" in slow.content
    assert time.monotonic() - started < 5


async def test_bash_environment_has_no_secrets(ctx, monkeypatch):
    from heddle.sessions.turns import tool_env
    env = tool_env({"PATH": "/usr/bin:/bin", "ANTHROPIC_API_KEY": "k", "GITHUB_TOKEN": "t"})
    ctx.env = env
    out = await Bash().run(BashInput("env"), ctx)
    assert "ANTHROPIC_API_KEY" not in out.content and "GITHUB_TOKEN" not in out.content


async def test_grep_modes(ctx):
    found = await Grep().run(norm(Grep(), ctx, pattern="t[wh]"), ctx)
    assert found.content.splitlines() == ["a.py:2:two", "a.py:3:three", "a.py:4:two"]
    files = await Grep().run(norm(Grep(), ctx, pattern="one", output_mode="files_with_matches"), ctx)
    assert files.content == "a.py"
    none = await Grep().run(norm(Grep(), ctx, pattern="zzz"), ctx)
    assert none.content == "No matches."


def test_schemas_are_messages_api_tool_definitions():
    schema = schema_of(Edit())
    assert schema["name"] == "Edit"
    assert schema["input_schema"]["required"] == ["path", "old_string", "new_string"]
    assert schema["input_schema"]["properties"]["replace_all"] == {"type": "boolean", "default": False}


def test_rules_and_modes(ctx):
    bash, edit, read = Bash(), Edit(), Read()
    git = BashInput("git status --short")
    assert rule_matches("Bash(git status:*)", bash, git, ctx)
    assert not rule_matches("Bash(git push:*)", bash, git, ctx)
    src = norm(edit, ctx, path="a.py", old_string="x", new_string="y")
    assert rule_matches("Edit(*.py)", edit, src, ctx)
    assert rule_matches("Edit", edit, src, ctx)
    policy = PermissionPolicy(allow=["Bash(git status:*)"], deny=["Bash(git status --short)"])
    assert isinstance(policy.decide(bash, git, ctx), Deny)  # deny beats allow
    assert isinstance(PermissionPolicy().decide(read, norm(read, ctx, path="a.py"), ctx), Allow)
    assert PermissionPolicy().decide(edit, src, ctx) == Ask("Edit(a.py)")
    assert isinstance(PermissionPolicy(mode="acceptEdits").decide(edit, src, ctx), Allow)
    assert isinstance(PermissionPolicy(mode="plan").decide(edit, src, ctx), Deny)
    assert isinstance(PermissionPolicy(mode="bypassPermissions").decide(bash, git, ctx), Allow)
