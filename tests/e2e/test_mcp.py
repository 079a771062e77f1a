"""MCP servers as tools, through the LSP door: a real stdio server on the `mcp` SDK
(`mcp_server.py`), the daemon over real stdio, the model scripted over real HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from e2e import lsp
from e2e.test_cli import heddle
from e2e.test_permissions import DONE, statuses, tool, write_settings
from procs import alive, all_dead

SERVER = Path(__file__).with_name("mcp_server.py")
SECRET = "hunter2-mcp-env-value"
HEADER_SECRET = "Bearer hunter3-mcp-header"


WAIT = "[mcp]\nstartup_timeout = 40\n\n"
"""A session waits for its servers until they are ready (a loaded machine is slow to start one;
the tests do not depend on how slow)."""


def server_toml(name: str, starts: Path, extra: str = "", env: str = "") -> str:
    args = json.dumps(["-I", str(SERVER)])
    return (WAIT + f'[mcp.servers.{name}]\ncommand = {json.dumps(sys.executable)}\nargs = {args}\n'
            f'env = {{ MCP_TEST_STARTS = {json.dumps(str(starts))}{env} }}\n{extra}')


def pids(starts: Path) -> list[int]:
    return [int(line) for line in starts.read_text().split()] if starts.exists() else []


def bytes_read(pid: int) -> int:
    """What the process has read so far (all files), as Linux counts it."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError(f"no rchar in /proc/{pid}/io")


async def until(predicate) -> None:
    while not predicate():
        await asyncio.sleep(0.01)


def results(scripted, model: str, request: int = -1) -> list[dict]:
    return [b for b in scripted.requests_for(model)[request].body["messages"][-1]["content"]
            if b["type"] == "tool_result"]


@pytest.fixture
def user_file(tmp_path) -> Path:
    return tmp_path / "config/heddle/settings.toml"


@pytest.fixture
def starts(tmp_path) -> Path:
    return tmp_path / "starts.txt"


async def new_session(client, workspace, model: str) -> dict:
    return await client.call("session/new", {"workspace": str(workspace), "model": model},
                             timeout=45)


async def test_tools_are_offered_called_and_their_results_converted(
        client, scripted, workspace, user_file, starts):
    write_settings(user_file, '[permissions]\nallow = ["mcp__srv__*"]\n'
                   + server_toml("srv", starts))
    scripted.add_scenario("calls", {"steps": [
        {"content": [tool("mcp__srv__echo", text="hi"), tool("mcp__srv__fail", why="no"),
                     tool("mcp__srv__picture")]},
        {"content": [tool("mcp__srv__echo", text="again")]}, DONE]})
    opened = await new_session(client, workspace, "calls")
    (srv,) = opened["mcpServers"]
    assert (srv["name"], srv["state"], srv["transport"], srv["source"]) == \
        ("srv", "ready", "stdio", "user")
    assert srv["tools"] == sorted(srv["tools"]) and "mcp__srv__echo" in srv["tools"]

    result = await client.call("turn/start", {"sessionId": opened["sessionId"], "prompt": "go"})

    assert result["reason"] == "completed"
    assert client.permission_requests == []  # the rule mcp__srv__* allowed them all
    assert statuses(client) == ["ok", "error", "ok", "ok"]
    echo, fail, picture = results(scripted, "calls", 1)
    assert echo["content"] == "echo: hi" and not echo["is_error"]
    assert fail["is_error"] and "failed on purpose: no" in fail["content"]
    assert picture["content"][-1]["type"] == "image"
    assert picture["content"][-1]["source"]["media_type"] == "image/png"
    bodies = [r.body for r in scripted.requests_for("calls")]
    offered = [t for t in bodies[0]["tools"] if t["name"].startswith("mcp__")]
    assert [t["name"] for t in offered] == srv["tools"]
    echo_def = next(t for t in offered if t["name"] == "mcp__srv__echo")
    assert echo_def["input_schema"]["required"] == ["text"]
    assert all(b["tools"] == bodies[0]["tools"] for b in bodies)  # the cache sees one prefix


async def test_calls_ask_by_default_and_a_read_only_hint_needs_the_users_word(
        daemon_env, daemon_command, scripted, workspace, user_file, starts):
    env = dict(daemon_env, GITHUB_TOKEN="ghp-secret", PLAIN_VAR="plain")
    names = ["GITHUB_TOKEN", "ANTHROPIC_API_KEY", "PLAIN_VAR", "SRV_SECRET"]
    for trust_read_only in (False, True):
        model = f"peek-{trust_read_only}"
        scripted.add_scenario(model, {"steps": [
            {"content": [tool("mcp__srv__peek", names=names), tool("mcp__srv__echo", text="x")]},
            DONE]})
        write_settings(user_file, server_toml(
            "srv", starts, f"trust_read_only = {str(trust_read_only).lower()}\n",
            env=f', SRV_SECRET = "{SECRET}"'))
        client = await lsp.start(env, daemon_command)
        try:
            client.answer = lambda params: {"decision": "allowOnce"}
            opened = await new_session(client, workspace, model)
            await client.call("turn/start", {"sessionId": opened["sessionId"], "prompt": "go"})
            asked = [r["tool"] for r in client.permission_requests]
            want = ["mcp__srv__echo"] if trust_read_only else ["mcp__srv__peek", "mcp__srv__echo"]
            assert asked == want
            echo = next(r for r in client.permission_requests if r["tool"] == "mcp__srv__echo")
            assert [o.get("rule") for o in echo["options"]][1] == "mcp__srv__echo"
            seen = json.loads(results(scripted, model)[0]["content"])["env"]
            # Heddle's secrets are not passed on; the server's own env is
            assert seen == {"GITHUB_TOKEN": None, "ANTHROPIC_API_KEY": None,
                            "PLAIN_VAR": "plain", "SRV_SECRET": SECRET}
        finally:
            await lsp.stop(client)
    log = (Path(daemon_env["HEDDLE_LOG_FILE"])).read_text()
    transcripts = "".join(p.read_text() for p in
                          Path(daemon_env["XDG_STATE_HOME"]).rglob("*.jsonl"))
    assert "mcp__srv__peek" in log + transcripts
    assert SECRET not in log and "ghp-secret" not in log


async def test_a_hanging_call_times_out_and_the_server_keeps_serving(
        client, scripted, workspace, user_file, starts):
    write_settings(user_file, '[permissions]\nallow = ["mcp__srv"]\n'
                   + server_toml("srv", starts, "timeout = 1\n"))
    scripted.add_scenario("hang", {"steps": [
        {"content": [tool("mcp__srv__hang")]}, {"content": [tool("mcp__srv__echo", text="up")]},
        DONE]})
    opened = await new_session(client, workspace, "hang")

    result = await client.call("turn/start", {"sessionId": opened["sessionId"], "prompt": "go"})

    assert result["reason"] == "completed"
    assert statuses(client) == ["error", "ok"]
    (hang,) = results(scripted, "hang", 1)
    assert hang["is_error"] and "did not answer hang within 1 s" in hang["content"]
    assert results(scripted, "hang", 2)[0]["content"] == "echo: up"
    assert len(pids(starts)) == 1


async def test_cancel_during_a_call_closes_it_and_the_server_keeps_serving(
        client, scripted, workspace, user_file, starts):
    write_settings(user_file, '[permissions]\nallow = ["mcp__srv"]\n' + server_toml("srv", starts))
    scripted.add_scenario("cancel", {"steps": [
        {"content": [tool("mcp__srv__hang")]}, {"content": [tool("mcp__srv__echo", text="on")]},
        DONE]})
    opened = await new_session(client, workspace, "cancel")
    sid = opened["sessionId"]
    (server,) = pids(starts)
    idle = bytes_read(server)  # ready: it reads nothing until it is sent a call
    turn = asyncio.ensure_future(client.call("turn/start", {"sessionId": sid, "prompt": "go"}))
    await client.wait_for_event("toolCallStarted", timeout=30)
    await asyncio.wait_for(until(lambda: bytes_read(server) > idle), 30)  # it has the call
    client.protocol.notify("turn/cancel", {"sessionId": sid})

    result = await asyncio.wait_for(turn, 15)

    assert result["reason"] == "cancelled"
    assert statuses(client) == ["cancelled"]
    follow = await client.call("turn/start", {"sessionId": sid, "prompt": "again"})
    assert follow["reason"] == "completed"
    assert results(scripted, "cancel")[0]["content"] == "echo: on"
    assert len(pids(starts)) == 1  # the same server answered


async def test_a_server_ready_after_the_bound_joins_at_the_next_turn(
        client, scripted, workspace, user_file, starts, tmp_path):
    gate = tmp_path / "gate"
    write_settings(user_file, server_toml("srv", starts, env=f', MCP_TEST_GATE = "{gate}"')
                   .replace("startup_timeout = 40", "startup_timeout = 0.2"))
    scripted.add_scenario("late", {"steps": [DONE, DONE]})
    opened = await new_session(client, workspace, "late")
    sid = opened["sessionId"]
    assert opened["mcpServers"][0]["state"] == "starting"

    await client.call("turn/start", {"sessionId": sid, "prompt": "one"})  # not waiting for it
    gate.touch()
    ready = await client.mcp_change(0, timeout=40)
    assert ready["message"] == "MCP server srv is ready; its tools are offered from the next turn."
    assert (ready["sessionId"], ready["server"]["state"]) == (sid, "ready")
    loaded = await client.call("session/load", {"sessionId": sid})  # a live session: its state
    assert loaded["mcpServers"] == [ready["server"]]
    await client.call("turn/start", {"sessionId": sid, "prompt": "two"})

    first, second = (r.body["tools"] for r in scripted.requests_for("late"))
    assert not any(t["name"].startswith("mcp__") for t in first)
    assert second[:len(first)] == first  # the built-in tools, then the server's
    assert [t["name"] for t in second[len(first):]] == ready["server"]["tools"]


async def test_a_crashed_server_is_restarted(client, scripted, workspace, user_file, starts):
    write_settings(user_file, '[permissions]\nallow = ["mcp__*"]\n' + server_toml("srv", starts))
    scripted.add_scenario("crash", {"steps": [
        {"content": [tool("mcp__srv__crash")]}, {"content": [tool("mcp__srv__echo", text="back")]},
        DONE]})
    opened = await new_session(client, workspace, "crash")

    result = await client.call("turn/start", {"sessionId": opened["sessionId"], "prompt": "go"})

    assert result["reason"] == "completed"
    (crash,) = results(scripted, "crash", 1)
    assert crash["is_error"] and "stopped while running crash" in crash["content"]
    assert "exited with code 3" in crash["content"]
    assert results(scripted, "crash", 2)[0]["content"] == "echo: back"
    first, second = pids(starts)
    assert not alive(first) and alive(second)


def dying_server(starts: Path, tmp_path: Path) -> str:
    """A server that dies (code 5, 42 lines on stderr, the last two `token: <SECRET>` and
    `error: the index is corrupt`) whenever the test makes the file `die`."""
    return server_toml("srv", starts, env=f', MCP_TEST_DIE = "{tmp_path / "die"}", '
                       f'MCP_TEST_TIMES = "{tmp_path / "times.txt"}", SRV_SECRET = "{SECRET}"')


LAST_WORDS = [f"loading the index: part {i}" for i in range(32, 40)] + [
    "token: [secret]", "error: the index is corrupt"]
"""What a report shows of the dying server's stderr: its last 10 lines, the secret masked."""


async def test_a_server_that_dies_while_idle_is_reported_at_once_and_restarted(
        client, scripted, workspace, user_file, starts, tmp_path):
    write_settings(user_file, '[permissions]\nallow = ["mcp__*"]\n'
                   + dying_server(starts, tmp_path))
    scripted.add_scenario("back", {"steps": [
        {"content": [tool("mcp__srv__echo", text="back")]}, DONE]})
    opened = await new_session(client, workspace, "back")
    assert opened["mcpServers"][0]["state"] == "ready"
    (first,) = pids(starts)

    (tmp_path / "die").touch()  # no turn runs: only the watch of its process can notice
    stopped = await client.mcp_change(0)

    assert stopped["sessionId"] == opened["sessionId"]
    assert stopped["server"]["state"] == "restarting"
    assert stopped["message"] == ("MCP server srv stopped (exited with code 5); restarting it "
                                  "in 0.5 s (restart 1 of 3).")
    assert stopped["stderr"] == LAST_WORDS
    assert stopped["restartInMs"] == 500
    assert SECRET not in json.dumps(client.mcp_changes)
    again = await client.mcp_change(1)
    assert (again["server"]["state"], again["server"]["restarts"]) == ("ready", 1)
    assert again["message"] == "MCP server srv is running again (restart 1 of 3)."
    assert "stderr" not in again and "restartInMs" not in again
    assert again["server"]["tools"] == opened["mcpServers"][0]["tools"]

    result = await client.call("turn/start", {"sessionId": opened["sessionId"], "prompt": "go"})

    assert result["reason"] == "completed"
    assert results(scripted, "back")[0]["content"] == "echo: back"
    assert not alive(first) and alive(pids(starts)[1])
    assert len(client.mcp_changes) == 2


@pytest.mark.timeout(120)  # four starts of a server on the SDK, seconds each on a loaded machine
async def test_restarts_wait_twice_as_long_each_time_then_the_failure_is_reported(
        client, scripted, workspace, user_file, starts, tmp_path):
    write_settings(user_file, '[permissions]\nallow = ["mcp__*"]\n'
                   + dying_server(starts, tmp_path))
    scripted.add_scenario("failed", {"steps": [
        {"content": [tool("mcp__srv__echo", text="x")]}, DONE]})
    opened = await new_session(client, workspace, "failed")

    for death in range(4):
        (tmp_path / "die").touch()
        await client.mcp_change(2 * death)  # restarting, then ready; or failed
        if death < 3:
            await client.mcp_change(2 * death + 1, timeout=60)

    changes = client.mcp_changes
    assert [c["server"]["state"] for c in changes] == ["restarting", "ready"] * 3 + ["failed"]
    delays = [c["restartInMs"] for c in changes if "restartInMs" in c]
    assert delays == [500, 1000, 2000]
    # and it did wait that long: from each death (the server's clock) to the next start
    times = (tmp_path / "times.txt").read_text().split("\n")
    starts_at = [float(t.split()[1]) for t in times if t.startswith("start")]
    exits_at = [float(t.split()[1]) for t in times if t.startswith("exit")]
    waited = [later - died for died, later in zip(exits_at, starts_at[1:])]
    assert len(waited) == 3 and all(w >= d / 1000 for w, d in zip(waited, delays)), waited
    failed = changes[-1]
    assert failed["message"] == (
        "MCP server srv failed (exited with code 5) and was restarted 3 times; it is not "
        "restarted again, so calls to its tools fail until the session is closed and loaded again.")
    assert failed["stderr"] == LAST_WORDS
    assert failed["server"]["restarts"] == 3 and "restartInMs" not in failed
    assert failed["server"]["error"] == (
        "exited with code 5; its last output: loading the index: part 39 | token: [secret] | "
        "error: the index is corrupt (restarted 3 times; not again)")

    await client.call("turn/start", {"sessionId": opened["sessionId"], "prompt": "go"})

    (call,) = results(scripted, "failed")
    assert call["is_error"] and call["content"] == (
        f"The MCP server srv has failed: {failed['server']['error']}. So echo could not be "
        "called, and the server's tools stay unavailable in this session.")
    assert statuses(client) == ["error"]
    assert len(pids(starts)) == 4 and SECRET not in json.dumps(call)


def test_heddle_ask_prints_a_servers_death_with_its_last_output(
        daemon_env, scripted, workspace, user_file, starts):
    write_settings(user_file, server_toml("srv", starts, env=f', SRV_SECRET = "{SECRET}"'))
    scripted.add_scenario("ask", {"steps": [
        {"content": [tool("mcp__srv__leak", names=["SRV_SECRET"])]},
        {"content": [tool("mcp__srv__echo", text="back")]}, DONE]})

    result = heddle(["ask", "-w", str(workspace), "-m", "ask", "-y", "go"], daemon_env)

    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    stopped = lines.index("heddle: warning: MCP server srv stopped (exited with code 4); "
                          "restarting it in 0.5 s (restart 1 of 3).")
    assert lines[stopped + 1:stopped + 3] == ["  its last output:",
                                              "  my credentials: [secret]"]
    assert "heddle: MCP server srv is running again (restart 1 of 3)." in lines
    assert SECRET not in result.stderr + result.stdout


async def test_a_server_that_keeps_dying_is_restarted_a_bounded_number_of_times(
        client, scripted, workspace, user_file, starts):
    write_settings(user_file, server_toml(
        "srv", starts, env=', MCP_TEST_EXIT_AT_START = "1"'))
    scripted.add_scenario("dead", {"steps": [{"content": [tool("mcp__srv__echo", text="x")]},
                                            DONE]})
    opened = await new_session(client, workspace, "dead")
    (srv,) = opened["mcpServers"]
    assert srv["state"] == "failed" and srv["restarts"] == 3 and "tools" not in srv
    assert "exited with code 7" in srv["error"] and "not today" in srv["error"]
    assert len(pids(starts)) == 4
    # every client shows a result's warnings: the missing tools are explained
    (warning,) = [w for w in opened.get("warnings", []) if "MCP server" in w]
    assert warning.startswith("MCP server srv could not be started (exited with code 7")
    assert warning.endswith("its tools are not offered in this session")

    await client.call("turn/start", {"sessionId": opened["sessionId"], "prompt": "go"})
    (call,) = results(scripted, "dead", 1)  # never listed: not offered, so unknown
    assert call["is_error"] and "There is no tool named mcp__srv__echo" in call["content"]
    assert len(pids(starts)) == 4


async def test_a_project_server_starts_only_once_the_project_is_trusted(
        client, scripted, workspace, user_file, starts):
    write_settings(user_file, WAIT)
    write_settings(workspace / ".heddle/settings.toml", server_toml("proj", starts)[len(WAIT):])
    opened = await new_session(client, workspace, "any")
    assert opened.get("mcpServers", []) == []
    ignored = opened["untrustedSettings"]["ignored"]
    assert [line for line in ignored if line.startswith("MCP server proj `")] == \
        [f"MCP server proj `{sys.executable} -I {SERVER}`"]
    assert pids(starts) == []

    await lsp.trust(client, workspace)
    trusted = await new_session(client, workspace, "any")
    (proj,) = trusted["mcpServers"]
    assert (proj["name"], proj["source"], proj["state"]) == ("proj", "project", "ready")
    assert len(pids(starts)) == 1


async def test_servers_stop_with_their_session_and_with_the_daemon(
        daemon_env, daemon_command, scripted, workspace, user_file, starts):
    write_settings(user_file, '[permissions]\nallow = ["mcp__srv__child"]\n'
                   + server_toml("srv", starts))
    scripted.add_scenario("child", {"steps": [{"content": [tool("mcp__srv__child")]}, DONE]})
    client = await lsp.start(daemon_env, daemon_command)
    try:
        one = await new_session(client, workspace, "child")
        await new_session(client, workspace, "child")  # a second session: its own server
        await client.call("turn/start", {"sessionId": one["sessionId"], "prompt": "go"})
        child = int(results(scripted, "child")[0]["content"])
        first, second = pids(starts)
        assert alive(first) and alive(second) and alive(child)

        closed = await client.call("session/close", {"sessionId": one["sessionId"]})
        assert closed == {"sessionId": one["sessionId"], "mcpServersStopped": 1}
        assert await all_dead([first, child])  # the server's whole process group
        assert alive(second)
    finally:
        await lsp.stop(client)
    assert await all_dead([second])


class HttpServer:
    """The test server over streamable HTTP on a loopback port, which may be stopped and
    started again on the same port."""

    def __init__(self, tmp_path: Path):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.log_path = tmp_path / "http-server.log"
        self.proc: subprocess.Popen | None = None

    def start(self, gate: Path | None = None) -> None:
        """Start it, and wait until it listens; with `gate`, it loads and then waits for that
        file to exist before it listens (start() returns at once)."""
        env = dict(os.environ, **({"MCP_TEST_GATE": str(gate)} if gate else {}))
        with self.log_path.open("a") as log:
            self.proc = subprocess.Popen([sys.executable, "-I", str(SERVER), "--http",
                                          str(self.port)], stdout=log, stderr=subprocess.STDOUT,
                                         env=env)
        if gate is not None:
            return
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                assert self.proc.poll() is None, self.log_path.read_text()
                time.sleep(0.1)
        raise AssertionError(f"the HTTP server did not listen within 30 s: {self.log_path.read_text()}")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def http_server(tmp_path):
    server = HttpServer(tmp_path)
    try:
        server.start()
        yield server
    finally:
        server.stop()


async def test_a_streamable_http_server_gets_its_headers(
        client, scripted, workspace, user_file, http_server, daemon_env, tmp_path):
    write_settings(user_file, f'[permissions]\nallow = ["mcp__web"]\n\n{WAIT}'
                   f'[mcp.servers.web]\nurl = "{http_server.url}"\n'
                   f'headers = {{ Authorization = "{HEADER_SECRET}" }}\n')
    scripted.add_scenario("web", {"steps": [
        {"content": [tool("mcp__web__header", key="Authorization"),
                     tool("mcp__web__echo", text="over http")]}, DONE,
        {"content": [tool("mcp__web__echo", text="?")]}, DONE,
        {"content": [tool("mcp__web__echo", text="back again")]}, DONE]})
    opened = await new_session(client, workspace, "web")
    (web,) = opened["mcpServers"]
    assert (web["transport"], web["state"]) == ("http", "ready")

    await client.call("turn/start", {"sessionId": opened["sessionId"], "prompt": "go"})

    header, echo = results(scripted, "web")
    assert header["content"] == HEADER_SECRET and echo["content"] == "echo: over http"
    assert HEADER_SECRET not in Path(daemon_env["HEDDLE_LOG_FILE"]).read_text()

    gone_server = http_server.proc
    http_server.start(gate := tmp_path / "gate")  # its successor loads (seconds), then waits
    await asyncio.wait_for(until(Path(f"{gate}.loaded").exists), 30)
    gone_server.kill()  # the server goes away: a call is an error result, the session goes on
    gone_server.wait(10)
    again = asyncio.ensure_future(client.call(
        "turn/start", {"sessionId": opened["sessionId"], "prompt": "go"}))
    await asyncio.wait_for(until(lambda: client.mcp_changes), 30)  # the call found it gone
    assert client.mcp_changes[0]["server"]["state"] == "restarting"
    gate.touch()  # back on the same URL, while Heddle still connects again (3.5 s at most)
    assert (await again)["reason"] == "completed"
    (gone,) = results(scripted, "web")
    assert gone["is_error"] and "The MCP server web" in gone["content"]
    await asyncio.wait_for(until(
        lambda: client.mcp_changes[-1]["server"]["state"] != "restarting"), 30)
    assert client.mcp_changes[-1]["server"]["state"] == "ready"
    back = await client.call("turn/start", {"sessionId": opened["sessionId"], "prompt": "go"})
    assert back["reason"] == "completed"
    (echo,) = results(scripted, "web")
    assert echo == {**echo, "content": "echo: back again", "is_error": False}


async def test_a_killed_daemon_leaves_no_server_behind(daemons, scripted, workspace,
                                                      user_file, starts):
    write_settings(user_file, '[permissions]\nallow = ["mcp__srv__child"]\n'
                   + server_toml("srv", starts))
    scripted.add_scenario("child", {"steps": [{"content": [tool("mcp__srv__child")]}, DONE]})
    daemon = await daemons()
    opened = await daemon.call("session/new", {"workspace": str(workspace), "model": "child"},
                               timeout=45)
    await daemon.call("turn/start", {"sessionId": opened["sessionId"], "prompt": "go"})
    child = int(results(scripted, "child")[0]["content"])  # it does not read the server's stdin
    (pid,) = pids(starts)
    assert alive(child)

    await daemon.kill()  # SIGKILL: no clean-up of its own; the reaper kills the group

    assert await all_dead([pid, child], within=10)


async def test_a_servers_secrets_in_its_stderr_are_masked(
        daemon_env, daemon_command, scripted, workspace, user_file, starts):
    env = dict(daemon_env, GITHUB_TOKEN="ghp-passed-through", PLAIN_VAR="plain-and-visible")
    write_settings(user_file, '[permissions]\nallow = ["mcp__*"]\n' + server_toml(
        "srv", starts, 'pass_env = ["GITHUB_TOKEN"]\n', env=f', SRV_SECRET = "{SECRET}"'))
    names = ["SRV_SECRET", "GITHUB_TOKEN", "PLAIN_VAR"]
    scripted.add_scenario("leak", {"steps": [
        {"content": [tool("mcp__srv__leak", names=names)]}, DONE]})
    client = await lsp.start(env, daemon_command)
    try:
        opened = await new_session(client, workspace, "leak")
        result = await client.call("turn/start", {"sessionId": opened["sessionId"], "prompt": "go"})
    finally:
        await lsp.stop(client)
    assert result["reason"] == "completed"
    (leak,) = results(scripted, "leak", 1)
    # the server's last words reach the model, its secrets do not
    assert leak["is_error"] and "exited with code 4" in leak["content"]
    assert "my credentials: [secret], [secret], plain-and-visible" in leak["content"]
    log = Path(daemon_env["HEDDLE_LOG_FILE"]).read_text()
    assert "my credentials: [secret], [secret], plain-and-visible" in log
    transcripts = "".join(p.read_text() for p in
                          Path(daemon_env["XDG_STATE_HOME"]).rglob("*.jsonl"))
    for secret in (SECRET, "ghp-passed-through"):
        assert secret not in log + transcripts + json.dumps(leak)


async def test_a_startup_timeout_of_0_answers_without_waiting_for_the_servers(
        client, scripted, workspace, user_file, starts, tmp_path):
    """The project's `startup_timeout = 0` wins over the user's 40 and means: do not wait. The
    server's gate opens as soon as its process runs, so a session that waited for it (5 s, or
    the user's 40) would find it ready."""
    gate = tmp_path / "gate"
    write_settings(user_file, server_toml("srv", starts, env=f', MCP_TEST_GATE = "{gate}"'))
    write_settings(workspace / ".heddle/settings.toml", "[mcp]\nstartup_timeout = 0\n")
    scripted.add_scenario("now", {"steps": [DONE]})
    pending = asyncio.ensure_future(new_session(client, workspace, "now"))
    for _ in range(600):
        if pending.done() or pids(starts):
            break
        await asyncio.sleep(0.05)
    gate.touch()
    opened = await pending
    assert opened.get("untrustedSettings") is None  # the project file only narrows: it applies
    (srv,) = opened["mcpServers"]
    assert srv["state"] == "starting"
    result = await client.call("turn/start", {"sessionId": opened["sessionId"], "prompt": "go"})
    assert result["reason"] == "completed"
