"""Bash (process group, timeout, cancel, output cap, environment) and TodoWrite."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from heddle.core.events import TodoItem, TodoUpdate
from heddle.core.tools import ToolContext
from heddle.processes.environment import tool_env
from heddle.tools.shell import Bash, BashInput, HeadTail
from heddle.tools.todo import TodoWrite, TodoWriteInput
from procs import alive, all_dead

import msgspec


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(tmp_path.resolve(), env=tool_env())


async def wait_for(path: Path) -> int:
    with anyio.fail_after(10):
        while not path.exists() or not path.read_text().strip():
            await anyio.sleep(0.02)
    return int(path.read_text())


# A shell that starts a grandchild in its own subshell which ignores SIGTERM.
STUBBORN = ("(trap '' TERM; sleep 60) & echo $! > child.pid; "
            "bash -c 'trap \"\" TERM; sleep 60' & echo $! > grandchild.pid; wait")


async def test_bash_runs_in_the_workspace_with_exit_code(ctx):
    out = await Bash().run(BashInput("pwd; echo err >&2; exit 4"), ctx)
    assert out.content == f"Exit code 4\n{ctx.workspace}\nerr\n"
    assert out.summary == "exit 4" and not out.is_error


async def test_bash_timeout_kills_the_whole_group(ctx):
    # 2 s: time for the shell to write both pid files first, even on a loaded machine
    started = time.monotonic()
    out = await Bash().run(BashInput(STUBBORN, timeout=2000), ctx)
    assert out.is_error and out.summary == "timed out after 2 s"
    pids = [int((ctx.workspace / f).read_text()) for f in ("child.pid", "grandchild.pid")]
    assert await all_dead(pids)
    assert time.monotonic() - started < 20  # the timeout and the kill grace, not the sleep 60


async def test_bash_cancel_kills_the_whole_group(ctx):
    async with anyio.create_task_group() as tg:
        tg.start_soon(Bash().run, BashInput(STUBBORN), ctx)
        pids = [await wait_for(ctx.workspace / f) for f in ("child.pid", "grandchild.pid")]
        assert all(alive(p) for p in pids)
        tg.cancel_scope.cancel()
    assert await all_dead(pids)


async def test_bash_keeps_head_and_tail_of_long_output(ctx):
    out = await Bash().run(BashInput("echo FIRST; head -c 300000 /dev/zero | tr '\\0' x; "
                                     "echo; echo LAST"), ctx)
    assert out.content.startswith("Exit code 0\nFIRST\n")
    assert out.content.rstrip().endswith("LAST")
    assert "omitted" in out.content and len(out.content) <= Bash.max_result_chars + 200


def test_head_tail_buffer():
    buf = HeadTail(4)
    for chunk in (b"ab", b"cdef", b"ghij"):
        buf.add(chunk)
    assert (buf.head, buf.tail, buf.dropped) == (b"abcd", b"ghij", 2)


async def test_bash_environment_drops_secrets_unless_passed(ctx):
    environ = {"PATH": "/usr/bin:/bin", "ANTHROPIC_API_KEY": "sk-1", "GITHUB_TOKEN": "gh",
               "DB_PASSWORD": "pw", "EDITOR": "vi"}
    ctx.env = tool_env(environ, pass_env=["GITHUB_TOKEN"])
    out = await Bash().run(BashInput("env | sort"), ctx)
    assert "GITHUB_TOKEN=gh" in out.content and "EDITOR=vi" in out.content
    assert "sk-1" not in out.content and "pw" not in out.content


def test_bash_rule_offered_for_allow_always(ctx):
    bash = Bash()
    assert bash.rule_for(BashInput("git status --short"), ctx) == "Bash(git status:*)"
    assert bash.rule_for(BashInput("pytest -x tests"), ctx) == "Bash(pytest:*)"
    assert bash.rule_for(BashInput("make && rm -rf build"), ctx) == "Bash(make && rm -rf build)"


async def test_todowrite_streams_the_plan(ctx):
    seen = []
    ctx.emit = seen.append
    inp = msgspec.convert({"todos": [
        {"content": "Read the code", "status": "completed"},
        {"content": "Fix the bug", "status": "in_progress", "active_form": "Fixing the bug"},
        {"content": "Run the tests", "status": "pending"}]}, TodoWriteInput)
    out = await TodoWrite().run(inp, ctx)
    assert seen == [TodoUpdate((TodoItem("Read the code", "completed"),
                                TodoItem("Fix the bug", "in_progress", "Fixing the bug"),
                                TodoItem("Run the tests", "pending")))]
    assert out.summary == "1/3 done"
    assert "1 completed, 1 in progress, 1 pending" in out.content
    with pytest.raises(msgspec.ValidationError, match=r"`\$.todos\[0\].status`"):
        msgspec.convert({"todos": [{"content": "x", "status": "done"}]}, TodoWriteInput)
