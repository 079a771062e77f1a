"""`heddle acp` driven by acpx (npm), an ACP client Heddle did not write, over real stdio.

acpx is installed by `./dev test` (`npm install` from the lockfile in tests/acp/acpx); its `--format json` output
is every JSON-RPC message it exchanged with the agent, which these tests read.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
from pathlib import Path

import pytest

ACPX = Path(__file__).parent / "acpx" / "node_modules" / ".bin" / "acpx"
AGENT = f"{sys.executable} -I -m heddle acp"

if shutil.which("node") is None:
    pytest.skip("acpx needs node", allow_module_level=True)


def read_edit() -> dict:
    return {"steps": [
        {"content": [{"type": "text", "text": "Let me read."},
                     {"type": "tool_use", "name": "Read", "input": {"path": "app.py"}}]},
        {"match": {"lastUserContains": "def greet"},
         "content": [{"type": "tool_use", "name": "Edit", "input": {
             "path": "app.py", "old_string": "'Hello, ' + name",
             "new_string": "f'Hello, {name}!'"}}]},
        {"content": [{"type": "text", "text": "Done."}]}]}


class Acpx:
    def __init__(self, env: dict[str, str], cwd: Path, home: Path):
        assert ACPX.exists(), f"acpx is not installed: run ./dev test, or npm install --prefix {ACPX.parents[2]}"
        self.env = {**env, "HOME": str(home)}
        self.cwd = cwd
        self.queues = home / ".acpx" / "queues"
        """Where a persistent session's queue owner keeps its lease (`KEY.lock`) while it lives."""

    async def owners_gone(self, timeout: float = 30) -> None:
        """Wait until no queue owner lives (their `--ttl` ran out and they retired): the next
        command starts a fresh agent process rather than reaching the old one."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while list(self.queues.glob("*.lock")):
            assert loop.time() < end, f"acpx queue owners still live: {list(self.queues.iterdir())}"
            await asyncio.sleep(0.05)

    async def start(self, *args: str) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            str(ACPX), "--agent", AGENT, "--cwd", str(self.cwd), "--format", "json", *args,
            env=self.env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)

    async def run(self, *args: str, timeout: float = 45) -> tuple[int, list[dict], str]:
        """acpx's exit code, the messages and its stderr. A persistent session's queue owner
        that is still shutting down (its TTL ran out) answers QUEUE_OWNER_CLOSED, which acpx
        calls retryable: retried, at most 5 times."""
        for _ in range(5):
            code, wire, err = await self._run(args, timeout)
            if code == 0 or "QUEUE_OWNER_CLOSED" not in json.dumps(wire):
                break
            await asyncio.sleep(0.5)
        return code, wire, err

    async def _run(self, args, timeout: float) -> tuple[int, list[dict], str]:
        proc = await self.start(*args)
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        return proc.returncode, messages(out), err.decode(errors="replace")


def messages(out: bytes) -> list[dict]:
    found = []
    for line in out.decode(errors="replace").splitlines():
        try:
            found.append(json.loads(line))
        except ValueError:
            continue
    return found


def methods(wire: list[dict]) -> list[str]:
    return [m["method"] for m in wire if "method" in m]


def updates(wire: list[dict]) -> list[dict]:
    return [m["params"]["update"] for m in wire if m.get("method") == "session/update"]


def stop_reasons(wire: list[dict]) -> list[str]:
    return [m["result"]["stopReason"] for m in wire
            if isinstance(m.get("result"), dict) and "stopReason" in m["result"]]


def processes_naming(marker: str) -> list[int]:
    """Pids of live processes whose command line holds `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and any(marker.encode() in arg for arg in argv):
            found.append(int(entry.name))
    return found


async def read_until(proc: asyncio.subprocess.Process, needle: bytes,
                     timeout: float = 30) -> bytes:
    """acpx's output up to the line holding `needle`."""
    seen = b""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while needle not in seen:
        line = await asyncio.wait_for(proc.stdout.readline(), max(0.1, end - loop.time()))
        assert line, f"acpx ended before {needle!r}: {seen[-2000:]!r}"
        seen += line
    return seen


async def interrupted(proc: asyncio.subprocess.Process, needle: bytes) -> list[dict]:
    """Ctrl-C for acpx (it sends session/cancel) once its output shows `needle`; every message
    it exchanged."""
    try:
        seen = await read_until(proc, needle)
        proc.send_signal(signal.SIGINT)
        rest, _ = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return messages(seen + rest)


@pytest.fixture
def acpx(daemon_env, workspace, tmp_path):
    return lambda model: Acpx({**daemon_env, "HEDDLE_MODEL": model}, workspace, tmp_path)


async def test_read_and_edit_with_a_permission(acpx, scripted, workspace):
    scripted.add_scenario("edit", read_edit())
    code, wire, err = await acpx("edit").run("--approve-all", "exec", "Use an f-string")
    assert code == 0, err
    assert stop_reasons(wire) == ["end_turn"]
    called = methods(wire)
    assert "session/request_permission" in called
    assert "fs/read_text_file" in called and "fs/write_text_file" in called  # acpx offers fs
    assert "f'Hello, {name}!'" in (workspace / "app.py").read_text()  # acpx wrote it
    final = {u["toolCallId"]: u["status"] for u in updates(wire)
             if u["sessionUpdate"] == "tool_call_update" and "status" in u}
    assert list(final.values()) == ["completed", "completed"]


async def test_a_denied_edit_fails_its_call(acpx, scripted, workspace):
    scripted.add_scenario("edit", read_edit())
    before = (workspace / "app.py").read_text()
    code, wire, err = await acpx("edit").run("--deny-all", "exec", "Use an f-string")
    assert stop_reasons(wire) == ["end_turn"], err
    assert (workspace / "app.py").read_text() == before
    edit = [u for u in updates(wire) if u["sessionUpdate"] == "tool_call_update"
            and u.get("rawOutput", {}).get("status")]
    assert [u["rawOutput"]["status"] for u in edit] == ["ok", "rejected"]
    assert edit[-1]["status"] == "failed"


async def test_without_fs_the_client_is_never_asked_for_files(acpx, scripted, workspace):
    scripted.add_scenario("edit", read_edit())
    code, wire, err = await acpx("edit").run("--approve-all", "--no-fs", "--no-terminal",
                                             "exec", "Use an f-string")
    assert code == 0, err
    assert not [m for m in methods(wire) if m.startswith(("fs/", "terminal/"))]
    assert "f'Hello, {name}!'" in (workspace / "app.py").read_text()


async def test_interrupt_cancels_mid_stream(acpx, scripted):
    scripted.add_scenario("slow", {"steps": [
        {"content": [{"type": "text", "text": "word " * 600}], "chunk": 5, "delayMs": 20}]})
    wire = await interrupted(await acpx("slow").start("--approve-all", "exec", "Talk"),
                             b"agent_message_chunk")
    assert "session/cancel" in methods(wire)
    assert stop_reasons(wire) == ["cancelled"]


@pytest.mark.timeout(180)  # several acpx commands, each a cold agent start (15 s under load)
async def test_a_session_kept_across_agent_processes(acpx, scripted, workspace):
    scripted.add_scenario("keep", {"steps": [
        {"content": [{"type": "text", "text": "One."}]},
        {"content": [{"type": "text", "text": "Two."}]}]})
    client = acpx("keep")
    code, _, err = await client.run("--ttl", "0.5", "sessions", "new")
    assert code == 0, err
    code, wire, err = await client.run("--ttl", "0.5", "prompt", "first")
    assert code == 0 and stop_reasons(wire) == ["end_turn"], err
    code, wire, err = await client.run("--ttl", "0.5", "set-mode", "plan")
    assert code == 0, (err, wire)
    await client.owners_gone()
    code, wire, err = await client.run("--ttl", "0.5", "--approve-all", "prompt", "second")
    assert code == 0, err
    # a fresh agent process took the session back from its transcript
    assert {"session/resume", "session/load"} & set(methods(wire)), methods(wire)
    assert stop_reasons(wire) == ["end_turn"]
    history = scripted.requests_for("keep")[1].body["messages"]
    assert "One." in json.dumps(history)


async def test_bash_runs_in_acpxs_terminal(acpx, scripted, workspace):
    scripted.add_scenario("bash", {"steps": [
        {"content": [{"type": "tool_use", "name": "Bash",
                      "input": {"command": "echo hi-from-acpx > made.txt; echo shown"}}]},
        {"match": {"lastUserContains": "shown"},
         "content": [{"type": "text", "text": "Done."}]}]})
    code, wire, err = await acpx("bash").run("--approve-all", "exec", "Run it")
    assert code == 0, err
    assert stop_reasons(wire) == ["end_turn"]
    called = methods(wire)
    assert [m for m in called if m.startswith("terminal/")][:1] == ["terminal/create"]
    assert "terminal/release" in called
    assert (workspace / "made.txt").read_text() == "hi-from-acpx\n"


async def test_interrupt_cancels_mid_tool_and_closes_every_call(acpx, scripted, workspace):
    marker = f"acpx-mid-tool-{workspace.parent.name}"
    scripted.add_scenario("slowtool", {"steps": [
        {"content": [{"type": "text", "text": "Running it."},
                     {"type": "tool_use", "name": "Bash",
                      "input": {"command": f"echo started; sleep 30 # {marker}"}}]},
        {"content": [{"type": "text", "text": "never reached"}]}]})
    # --no-terminal: Heddle runs the command itself, so it is Heddle that must stop it
    wire = await interrupted(await acpx("slowtool").start(
        "--approve-all", "--no-terminal", "exec", "Run it"), b"started")
    assert "session/cancel" in methods(wire)
    assert stop_reasons(wire) == ["cancelled"]
    calls = [u["toolCallId"] for u in updates(wire) if u["sessionUpdate"] == "tool_call"]
    final = {u["toolCallId"]: u["status"] for u in updates(wire)
             if u["sessionUpdate"] == "tool_call_update"
             and u.get("status") in ("completed", "failed")}
    assert calls and set(final) == set(calls), (calls, final)
    assert processes_naming(marker) == [], "the cancelled command still runs"


@pytest.mark.timeout(180)  # several acpx commands, each a cold agent start (15 s under load)
async def test_plan_mode_set_by_acpx_refuses_the_edit(acpx, scripted, workspace):
    scripted.add_scenario("edit", read_edit())
    before = (workspace / "app.py").read_text()
    client = acpx("edit")
    code, _, err = await client.run("--ttl", "0.5", "sessions", "new")
    assert code == 0, err
    code, wire, err = await client.run("--ttl", "0.5", "set-mode", "plan")
    assert code == 0, (err, wire)
    code, wire, err = await client.run("--ttl", "0.5", "--approve-all", "prompt", "Use an f-string")
    assert code == 0, err
    assert stop_reasons(wire) == ["end_turn"]
    assert (workspace / "app.py").read_text() == before, "plan mode wrote the file"
    assert "fs/write_text_file" not in methods(wire)
    # the read ran, the edit was refused without asking: plan mode is read-only
    assert "session/request_permission" not in methods(wire)
    edit = [u for u in updates(wire) if u["sessionUpdate"] == "tool_call_update"
            and u.get("rawOutput", {}).get("status")]
    assert [u["rawOutput"]["status"] for u in edit] == ["ok", "rejected"]


@pytest.mark.timeout(180)  # several acpx commands, each a cold agent start (15 s under load)
async def test_a_killed_agents_session_is_loaded_by_the_next_prompt(acpx, scripted, workspace):
    marker = f"acpx-killed-{workspace.parent.name}"
    scripted.add_scenario("kill", {"steps": [
        {"content": [{"type": "tool_use", "name": "Bash",
                      "input": {"command": f"echo started; sleep 30 # {marker}"}}]},
        {"match": {"lastUserContains": "again"},
         "content": [{"type": "text", "text": "Back."}]}]})
    client = acpx("kill")
    code, _, err = await client.run("--ttl", "5", "sessions", "new")
    assert code == 0, err
    proc = await client.start("--ttl", "5", "--approve-all", "--no-terminal", "prompt", "Run it")
    try:
        await read_until(proc, b"started")
        agents = [pid for pid in processes_naming("heddle") if pid in processes_naming("acp")
                  and Path(f"/proc/{pid}/cwd").resolve() == workspace.resolve()]
        assert agents, "no agent process found"
        for pid in agents:
            os.kill(pid, signal.SIGKILL)  # the agent dies mid-tool, with no chance to clean up
        await asyncio.wait_for(proc.communicate(), 30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    code, wire, err = await client.run("--ttl", "0.5", "--approve-all", "prompt", "again")
    assert code == 0, err
    assert {"session/resume", "session/load"} & set(methods(wire)), methods(wire)
    assert stop_reasons(wire) == ["end_turn"]
    # the model hears of the killed call: its result says it did not finish
    history = json.dumps(scripted.requests_for("kill")[-1].body["messages"])
    assert marker in history and "tool_result" in history
