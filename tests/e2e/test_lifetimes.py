"""Process lifetimes: tool processes die with the daemon however it ends, and SIGINT/SIGTERM
stop the daemon the way `exit` does (turns cancelled, answers sent, tools killed)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import pytest

from e2e.test_bad_input import RawDaemon
from e2e.test_cancel import wait_for_file
from procs import alive, all_dead

TREE = ("sleep 300 & echo $! > child.pid; "
        "bash -c 'sleep 300 & echo $! > grandchild.pid; wait' & echo $! > middle.pid; "
        "echo $$ > shell.pid; wait")
"""A shell with a child and a grandchild, all in the background, waiting for them."""
TREE_PIDS = ("shell", "child", "middle", "grandchild")


@pytest.fixture
async def daemon(daemon_env, daemon_command, tmp_path):
    stderr = open(tmp_path / "daemon.stderr", "wb")
    proc = await asyncio.create_subprocess_exec(
        *daemon_command, env=daemon_env, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=stderr, limit=16 * 1024 * 1024)
    raw = RawDaemon(proc)
    await raw.initialize()
    yield raw
    if proc.returncode is None:
        proc.kill()
    await proc.wait()
    stderr.close()


async def start_tool_tree(raw: RawDaemon, scripted, workspace: Path, command: str = TREE
                          ) -> tuple[str, list[int]]:
    """A turn whose Bash call runs `command`; returns the session id and the tree's pids."""
    scripted.add_scenario("tree", {"steps": [
        {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": command}}]},
        {"content": [{"type": "text", "text": "Done."}]}]})
    created = await raw.request(2, "session/new", {"workspace": str(workspace), "model": "tree",
                                                   "permissionMode": "bypassPermissions"})
    sid = created["result"]["sessionId"]
    raw.send({"jsonrpc": "2.0", "id": 3, "method": "turn/start",
              "params": {"sessionId": sid, "prompt": "run it"}})
    pids = [int(await wait_for_file(workspace / f"{name}.pid")) for name in TREE_PIDS]
    assert all(alive(p) for p in pids)
    return sid, pids


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


async def read_until_closed(raw: RawDaemon, timeout: float = 15.0) -> list[dict]:
    """Every message the daemon sends until it closes stdout."""
    messages = []

    async def drain():
        while True:
            try:
                messages.append(await raw.read(timeout))
            except AssertionError:  # stdout closed
                return
    await asyncio.wait_for(drain(), timeout)
    return messages


async def test_tool_processes_die_with_a_killed_daemon(daemon, scripted, workspace):
    _, pids = await start_tool_tree(daemon, scripted, workspace)
    reaper = [p for p in children(daemon.proc.pid)
              if b"reaper" in Path(f"/proc/{p}/cmdline").read_bytes()]
    assert len(reaper) == 1

    started = time.monotonic()
    daemon.proc.kill()
    await daemon.proc.wait()

    assert await all_dead(pids + reaper, within=10)
    print(f"tool tree gone {time.monotonic() - started:.2f} s after SIGKILL")


async def test_hook_processes_die_with_a_killed_daemon(daemon, scripted, workspace, daemon_env):
    settings = Path(daemon_env["XDG_CONFIG_HOME"]) / "heddle" / "settings.toml"  # trusted as is
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(
        '[[hooks.PreToolUse]]\nmatcher = "Bash"\ntimeout = 120\n'
        f"command = {json.dumps('cat > /dev/null; ' + TREE)}\n")
    _, pids = await start_tool_tree(daemon, scripted, workspace, "true")  # the hook's tree

    daemon.proc.kill()
    await daemon.proc.wait()

    assert await all_dead(pids, within=10)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
async def test_a_signal_cancels_turns_then_exits(daemon, scripted, workspace, daemon_env, sig):
    sid, pids = await start_tool_tree(daemon, scripted, workspace)

    daemon.proc.send_signal(sig)
    messages = await read_until_closed(daemon)
    code = await asyncio.wait_for(daemon.proc.wait(), 15)

    reply = next(m for m in messages if m.get("id") == 3)
    assert reply["result"]["reason"] == "cancelled", reply
    finished = [m["params"]["event"] for m in messages if m.get("method") == "turn/event"
                and m["params"]["event"]["kind"] == "toolCallFinished"]
    assert [f["status"] for f in finished] == ["cancelled"]
    assert code == 128 + sig
    assert await all_dead(pids)
    records = [json.loads(line) for line in next(
        (Path(daemon_env["XDG_STATE_HOME"]) / "heddle" / "sessions").glob(f"{sid}*")
    ).read_text().splitlines()]
    assert [r["reason"] for r in records if r["type"] == "end"] == ["aborted_tools"]
    log = Path(daemon_env["HEDDLE_LOG_FILE"]).read_text()
    assert f"{sig.name}: cancelling 1 running turns, then exiting" in log
    assert f"exiting with code {128 + sig} ({sig.name})" in log


async def test_requests_during_a_signalled_stop_are_refused(daemon, scripted, workspace,
                                                            daemon_env):
    # a tool that ignores SIGTERM holds the stop for its kill grace (2 s)
    sid, pids = await start_tool_tree(daemon, scripted, workspace, "trap '' TERM; " + TREE)
    log = Path(daemon_env["HEDDLE_LOG_FILE"])
    daemon.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 10  # logged in the signal handler, as the stop begins
    while "SIGTERM: cancelling 1 running turns" not in log.read_text():
        assert time.monotonic() < deadline, "the daemon never logged the signal"
        await asyncio.sleep(0.02)
    daemon.send({"jsonrpc": "2.0", "id": 9, "method": "session/list", "params": {}})
    messages = await read_until_closed(daemon)
    refused = next(m for m in messages if m.get("id") == 9)
    assert refused["error"] == {"code": -32600, "message": "session/list: the daemon is stopping"}
    assert next(m for m in messages if m.get("id") == 3)["result"]["reason"] == "cancelled"
    assert await all_dead(pids)


async def test_a_second_signal_exits_at_once_and_still_kills_tools(daemon, scripted, workspace,
                                                                   daemon_env):
    sid, pids = await start_tool_tree(daemon, scripted, workspace, "trap '' TERM; " + TREE)
    log = Path(daemon_env["HEDDLE_LOG_FILE"])
    daemon.proc.send_signal(signal.SIGINT)
    deadline = time.monotonic() + 10
    while "SIGINT: cancelling" not in log.read_text():
        assert time.monotonic() < deadline, "the daemon never logged the first signal"
        await asyncio.sleep(0.02)

    daemon.proc.send_signal(signal.SIGINT)  # while the tool's group still ignores SIGTERM
    messages = await read_until_closed(daemon)
    code = await asyncio.wait_for(daemon.proc.wait(), 15)

    assert code == 130
    # exited before the cancelled turn could answer: the stop was cut short
    assert not any(m.get("id") == 3 for m in messages)
    assert await all_dead(pids)
    assert "SIGINT while stopping: killing tool processes and exiting now" in log.read_text()
