"""Bad input to the daemon over raw stdio: each gets a clear error, and the daemon keeps serving."""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from pathlib import Path

import pytest

from heddle.frames import Decoder, encode


class RawDaemon:
    """The daemon over raw stdio: bytes in as they are given, messages out (anything on stdout
    that is not a clean frame fails the test)."""

    def __init__(self, proc: asyncio.subprocess.Process):
        self.proc = proc
        self._frames = Decoder()
        self.unread: deque[bytes] = deque()
        """Bodies read from stdout and not taken by `read` yet."""

    def send_bytes(self, data: bytes) -> None:
        self.proc.stdin.write(data)

    def send(self, payload) -> None:
        self.send_bytes(encode(payload if isinstance(payload, bytes) else json.dumps(payload).encode()))

    async def read(self, timeout: float = 30.0) -> dict:
        # 30 s: the first model call of a fresh daemon waits for the SDK's import (seconds,
        # more on a loaded machine); a hang still fails well inside the test's 60 s
        async def one():
            while not self.unread:
                data = await self.proc.stdout.read(1 << 16)
                assert data, "the daemon closed stdout"
                self.unread.extend(self._frames.messages(data))
            return json.loads(self.unread.popleft())
        return await asyncio.wait_for(one(), timeout)

    async def request(self, msg_id, method: str, params=None, **extra) -> dict:
        message = {"jsonrpc": "2.0", "id": msg_id, "method": method, **extra}
        if params is not None:
            message["params"] = params
        self.send(message)
        return await self.request_reply(msg_id)

    async def request_reply(self, msg_id, timeout: float = 30.0) -> dict:
        """Read (and drop) messages until the reply to request `msg_id`."""
        deadline = time.monotonic() + timeout
        while True:
            reply = await self.read(max(0.1, deadline - time.monotonic()))
            if reply.get("id") == msg_id and "method" not in reply:
                return reply

    async def initialize(self) -> None:
        reply = await self.request(1, "initialize", {"processId": None, "rootUri": None,
                                                     "capabilities": {}})
        assert "result" in reply
        self.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})


@pytest.fixture
async def raw(daemon_env, daemon_command):
    proc = await asyncio.create_subprocess_exec(
        *daemon_command, env=daemon_env, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    yield RawDaemon(proc)
    if proc.returncode is None:
        proc.kill()
    # read what is left: a full stream reader stops reading and would never see the end of
    # the pipe that wait() also waits for
    await asyncio.wait_for(proc.stdout.read(), 10)
    await asyncio.wait_for(proc.wait(), 10)


async def test_request_before_initialize(raw):
    reply = await raw.request(7, "session/new", {"workspace": "/tmp"})
    assert reply["error"]["code"] == -32002
    assert "not initialized" in reply["error"]["message"]
    await raw.initialize()


async def test_garbage_then_valid_messages(raw, tmp_path):
    raw.send_bytes(b"this is not a header\r\n\x00\xff garbage\r\n\r\n")
    raw.send(b"{not json")
    parse_error = await raw.read()
    assert parse_error["error"]["code"] == -32700 and parse_error["id"] is None
    raw.send([1, 2, 3])
    assert (await raw.read())["error"]["code"] == -32600
    initialize = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": {
        "processId": None, "rootUri": None, "capabilities": {}}}).encode()
    raw.send_bytes(b"content-length: %d\r\n\r\n%s" % (len(initialize), initialize))  # lower case
    assert "capabilities" in (await raw.read())["result"]
    reply = await raw.request(6, "session/new", {"workspace": str(tmp_path)})
    assert reply["result"]["workspace"] == str(tmp_path)


async def test_unknown_method_invalid_and_missing_params(raw, tmp_path):
    await raw.initialize()
    unknown = await raw.request(2, "nope/nothing", {})
    assert unknown["error"]["code"] == -32601
    invalid = await raw.request(3, "session/new", {"workspace": 12})
    assert invalid["error"]["code"] == -32602
    assert "`$.workspace`" in invalid["error"]["message"]
    assert "data" not in invalid["error"] or not invalid["error"]["data"]
    missing = await raw.request(4, "session/new")
    assert missing["error"]["code"] == -32602 and "workspace" in missing["error"]["message"]
    wrong_mode = await raw.request(5, "session/new", {"workspace": str(tmp_path),
                                                      "permissionMode": "yolo"})
    assert wrong_mode["error"]["code"] == -32602 and "permissionMode" in wrong_mode["error"]["message"]
    nested = await raw.request(6, "session/new", {"workspace": str(tmp_path),
                                                  "systemPrompt": "x",
                                                  "extra": {"jsonrpc": "2.0", "method": "x"}})
    assert "sessionId" in nested["result"]
    missing_ws = await raw.request(8, "session/new", {"workspace": str(tmp_path / "nope")})
    assert missing_ws["error"]["code"] == -32012
    raw.send({"jsonrpc": "2.0", "method": "turn/cancel"})  # notification without params: ignored
    assert "result" in await raw.request(9, "session/new", {"workspace": str(tmp_path)})


async def test_requests_after_shutdown_are_refused_then_exit(raw):
    await raw.initialize()
    assert (await raw.request(2, "shutdown"))["result"] is None
    refused = await raw.request(3, "session/new", {"workspace": "/tmp"})
    assert refused["error"]["code"] == -32600
    raw.send({"jsonrpc": "2.0", "method": "exit"})
    assert await asyncio.wait_for(raw.proc.wait(), 5) == 0
    assert b"Traceback" not in await raw.proc.stderr.read()


async def test_a_workspace_with_a_nul_is_an_invalid_workspace(raw, tmp_path, daemon_env):
    """A NUL makes no path: -32012 saying so (not an internal error), for every method that
    takes a workspace, and the daemon goes on serving."""
    await raw.initialize()
    bad = f"{tmp_path}\u0000x"
    for msg_id, method, params in [(2, "session/new", {"workspace": bad}),
                                   (3, "session/list", {"workspace": bad}),
                                   (4, "workspace/trust", {"workspace": bad}),
                                   (5, "workspace/trust", {"workspace": bad, "dryRun": True})]:
        error = (await raw.request(msg_id, method, params))["error"]
        assert error == {"code": -32012,
                         "message": f"workspace {bad!r} is no path: it holds a NUL"}, method
    reply = await raw.request(6, "session/new", {"workspace": str(tmp_path)})
    assert reply["result"]["workspace"] == str(tmp_path)
    assert "Traceback" not in Path(daemon_env["HEDDLE_LOG_FILE"]).read_text()


async def test_initialize_without_capabilities_names_the_missing_field(raw, tmp_path):
    refused = await raw.request(1, "initialize", {"processId": None})
    assert refused["error"] == {
        "code": -32602,
        "message": "invalid params for initialize: Object missing required field `capabilities`"}
    wrong = await raw.request(2, "initialize", {"processId": "me", "capabilities": {}})
    assert wrong["error"]["message"] == (
        "invalid params for initialize: Expected `int | null` - at `$.processId`")
    await raw.request(3, "initialize", {"processId": None, "capabilities": {}})
    assert "result" in await raw.request(4, "session/new", {"workspace": str(tmp_path)})


async def test_a_lone_surrogate_escape_is_a_parse_error_that_says_so(raw, tmp_path):
    await raw.initialize()
    body = b'{"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"workspace": "\\ud800"}}'
    at = body.index(b"\\ud800")
    raw.send(body)
    error = await raw.read()
    assert error["id"] is None and error["error"] == {"code": -32700, "message": (
        "parse error: JSON is malformed: invalid \\u escape \\ud800, a lone UTF-16 surrogate "
        f"(not followed by a low surrogate \\udc00-\\udfff) (byte {at})")}
    # a pair, and an escaped backslash before "ud800", are fine
    for msg_id, text in [(3, "\\ud83d\\ude00"), (4, "\\\\ud800")]:
        raw.send(b'{"jsonrpc": "2.0", "id": %d, "method": "session/new", "params": '
                 b'{"workspace": "%s", "systemPrompt": "%s"}}' % (msg_id, str(tmp_path).encode(),
                                                                 text.encode()))
        assert "sessionId" in (await raw.request_reply(msg_id))["result"]


NOTIFICATIONS_WITH_IDS = [
    {"jsonrpc": "2.0", "id": 71, "method": "initialized", "params": {}},
    {"jsonrpc": "2.0", "id": 72, "method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": "file:///tmp/a.py", "languageId": "python", "version": 1, "text": "x"}}},
    {"jsonrpc": "2.0", "id": 73, "method": "$/cancelRequest", "params": {"id": 2}},
    {"jsonrpc": "2.0", "id": 74, "method": "turn/cancel", "params": {"sessionId": "nope"}},
]


async def test_a_notification_sent_with_an_id_is_refused_and_never_stalls_exit(raw, daemon_env):
    """A notification method with an `id` is a request JSON-RPC cannot serve: each is answered
    -32600 at once, and an `exit` right behind them does not wait for them."""
    await raw.initialize()
    raw.send_bytes(b"".join(encode(json.dumps(m).encode()) for m in [
        *NOTIFICATIONS_WITH_IDS, {"jsonrpc": "2.0", "id": 80, "method": "shutdown"},
        {"jsonrpc": "2.0", "method": "exit"}]))
    replies = [await raw.read() for _ in range(5)]
    assert [r["id"] for r in replies] == [71, 72, 73, 74, 80]
    for reply, sent in zip(replies, NOTIFICATIONS_WITH_IDS):
        assert reply["error"]["code"] == -32600
        assert reply["error"]["message"] == (
            f"invalid request: {sent['method']} is a notification; send it without an id")
    assert replies[-1]["result"] is None
    assert await asyncio.wait_for(raw.proc.wait(), 10) == 0
    log = Path(daemon_env["HEDDLE_LOG_FILE"]).read_text()
    assert "did not finish" not in log and "did not end" not in log and "Traceback" not in log


async def test_a_request_with_a_result_or_an_error_is_refused_and_never_stalls_exit(raw,
                                                                                   daemon_env):
    """A method, an id and an error (or a result) is neither a request nor a response: refused
    at once (pygls would take it for a reply, and exit would wait for its answer)."""
    await raw.initialize()
    raw.send_bytes(b"".join(encode(json.dumps(m).encode()) for m in [
        {"jsonrpc": "2.0", "id": 5, "method": "session/list", "error": {"code": 1, "message": "x"}},
        {"jsonrpc": "2.0", "id": 6, "method": "session/list", "result": {}},
        {"jsonrpc": "2.0", "id": 80, "method": "shutdown"}, {"jsonrpc": "2.0", "method": "exit"}]))
    replies = [await raw.read() for _ in range(3)]
    assert [r["id"] for r in replies] == [5, 6, 80]
    for reply in replies[:2]:
        assert reply["error"] == {"code": -32600, "message": (
            "invalid request: a message with a method and an id is a request, which has no "
            "result or error")}
    assert await asyncio.wait_for(raw.proc.wait(), 10) == 0
    assert "did not finish" not in Path(daemon_env["HEDDLE_LOG_FILE"]).read_text()


async def test_a_notification_with_an_id_leaves_the_daemon_serving(raw, tmp_path):
    await raw.initialize()
    for message in NOTIFICATIONS_WITH_IDS:
        raw.send(message)
        assert (await raw.request_reply(message["id"]))["error"]["code"] == -32600
    reply = await raw.request(81, "session/new", {"workspace": str(tmp_path)})
    assert reply["result"]["workspace"] == str(tmp_path)


async def test_client_closing_stdin_mid_turn_exits_cleanly(raw, scripted, workspace, daemon_env):
    # a turn of 200 s: the daemon exits long before it would end
    scripted.add_scenario("slow", {"steps": [
        {"content": [{"type": "text", "text": "x" * 20000}], "chunk": 2, "delayMs": 20}]})
    await raw.initialize()
    session = (await raw.request(2, "session/new", {"workspace": str(workspace),
                                                    "model": "slow"}))["result"]
    raw.send({"jsonrpc": "2.0", "id": 3, "method": "turn/start",
              "params": {"sessionId": session["sessionId"], "prompt": "go"}})
    while (await raw.read())["params"]["event"]["kind"] != "textDelta":
        pass
    raw.proc.stdin.close()
    code = await asyncio.wait_for(raw.proc.wait(), 30)  # not the turn's 200 s
    assert code == 1  # ended without shutdown
    stderr = (await raw.proc.stderr.read()).decode()
    log = open(daemon_env["HEDDLE_LOG_FILE"]).read()
    assert "Traceback" not in stderr + log and "stdin closed" in log


async def test_everything_sent_at_start_is_answered_in_order(raw, daemon_env, workspace):
    """An editor that writes initialize and its first requests at once, while the daemon is
    still loading: initialize is answered, then every request, in order; nothing is lost."""
    caps = {"general": {"positionEncodings": ["utf-8", "utf-16"]},
            "textDocument": {"synchronization": {"willSave": True}},
            "experimental": {"heddle": {"permissionRequests": True}}}
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"processId": None, "rootUri": workspace.as_uri(), "capabilities": caps}},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"workspace": str(workspace)}},
        {"jsonrpc": "2.0", "id": 3, "method": "session/list", "params": {}},
        {"jsonrpc": "2.0", "id": 4, "method": "shutdown"},
    ]
    raw.send_bytes(b"".join(encode(json.dumps(m).encode()) for m in messages))
    replies = [await raw.read() for _ in range(4)]
    assert [r["id"] for r in replies] == [1, 2, 3, 4]
    capabilities = replies[0]["result"]["capabilities"]
    assert capabilities["positionEncoding"] == "utf-8"
    assert capabilities["textDocumentSync"]["willSave"] is False
    assert capabilities["experimental"]["heddle"]["tools"][0] == "Read"
    session_id = replies[1]["result"]["sessionId"]
    assert [s["sessionId"] for s in replies[2]["result"]["sessions"]] == [session_id]
    assert "result" in replies[3]
    raw.send({"jsonrpc": "2.0", "method": "exit"})
    assert await asyncio.wait_for(raw.proc.wait(), 10) == 0
    log = Path(daemon_env["HEDDLE_LOG_FILE"]).read_text()
    assert "the server computes" not in log and "Traceback" not in log


@pytest.mark.parametrize("close_stdin", [False, True], ids=["stdin-open", "stdin-closed"])
@pytest.mark.parametrize("shutdown", [True, False], ids=["after-shutdown", "no-shutdown"])
async def test_exit_sent_at_start_comes_after_every_answer(raw, daemon_env, shutdown,
                                                           close_stdin):
    """`exit` written together with the first requests, while the daemon still loads, is
    handled in order: every request before it is answered, then the daemon exits, with code
    0 if `shutdown` came first and 1 if not (also when stdin ends right after, as with a pipe)."""
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"processId": None, "rootUri": None, "capabilities": {}}},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "session/list", "params": {}},
        *([{"jsonrpc": "2.0", "id": 3, "method": "shutdown"}] if shutdown else []),
        {"jsonrpc": "2.0", "method": "exit"},
    ]
    raw.send_bytes(b"".join(encode(json.dumps(m).encode()) for m in messages))
    if close_stdin:
        raw.proc.stdin.close()
    replies = [await raw.read() for _ in range(3 if shutdown else 2)]
    assert [r["id"] for r in replies] == ([1, 2, 3] if shutdown else [1, 2])
    assert all("result" in r for r in replies), replies
    assert replies[1]["result"]["sessions"] == []
    assert not raw.unread and await asyncio.wait_for(raw.proc.stdout.read(), 10) == b""  # nothing after them
    assert await asyncio.wait_for(raw.proc.wait(), 10) == (0 if shutdown else 1)
    log = Path(daemon_env["HEDDLE_LOG_FILE"]).read_text()
    assert "Traceback" not in log


async def test_requests_after_shutdown_are_refused_even_before_it_is_done(raw, daemon_env):
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"processId": None, "rootUri": None, "capabilities": {}}},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "shutdown"},
        {"jsonrpc": "2.0", "id": 3, "method": "session/list", "params": {}},
    ]
    raw.send_bytes(b"".join(encode(json.dumps(m).encode()) for m in messages))
    replies = {r["id"]: r for r in [await raw.read() for _ in range(3)]}
    assert "result" in replies[1] and "result" in replies[2]
    assert replies[3]["error"]["code"] == -32600
    assert "only exit is accepted" in replies[3]["error"]["message"]
    raw.send({"jsonrpc": "2.0", "method": "exit"})
    assert await asyncio.wait_for(raw.proc.wait(), 10) == 0


BAD_SETTINGS = {
    "HEDDLE_CONTEXT_WINDOW": ("lots", "HEDDLE_CONTEXT_WINDOW must be a whole number, not 'lots'"),
    "HEDDLE_LOG_LEVEL": ("LOUD", "HEDDLE_LOG_LEVEL must be one of DEBUG, INFO, WARNING, ERROR, "
                                 "CRITICAL, not 'LOUD'"),
    "ANTHROPIC_BASE_URL": ("ftp://x", "ANTHROPIC_BASE_URL is not an http(s) URL: 'ftp://x'"),
}


@pytest.mark.parametrize("name", BAD_SETTINGS)
async def test_a_bad_setting_is_shown_to_the_editor_and_the_daemon_stops(daemon_env,
                                                                         daemon_command, name):
    value, why = BAD_SETTINGS[name]
    env = {**daemon_env, name: value}
    proc = await asyncio.create_subprocess_exec(
        *daemon_command, env=env, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    raw = RawDaemon(proc)
    try:
        raw.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"processId": None, "capabilities": {}}})
        shown = await raw.read()
        if "result" in shown:  # answered early, before the daemon found the setting bad
            shown = await raw.read()
        assert shown["method"] == "window/showMessage" and shown["params"]["type"] == 1
        assert shown["params"]["message"] == f"Heddle cannot start: {why}"
        assert await asyncio.wait_for(proc.wait(), 10) == 1
        assert why in Path(daemon_env["HEDDLE_LOG_FILE"]).read_text()
        stderr = (await asyncio.wait_for(proc.stderr.read(), 10)).decode()
        assert why in stderr and "Traceback" not in stderr
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_invalid_ids_are_refused_or_ignored_and_serving_goes_on(raw):
    raw.send({"jsonrpc": "2.0", "id": {"a": 1}, "method": "initialize",
              "params": {"processId": None, "capabilities": {}}})
    raw.send({"jsonrpc": "2.0", "id": [1], "result": None})  # a "response" nobody asked for
    refused = await raw.read()
    assert refused["id"] is None and refused["error"]["code"] == -32600
    assert "id must be a string, a number or null" in refused["error"]["message"]
    await raw.initialize()
    reply = await raw.request(3, "session/list", {})
    assert "result" in reply


async def test_a_failure_inside_the_daemon_is_one_line_without_a_traceback(raw, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / ".heddle").write_text("a file where the settings folder should be")
    await raw.initialize()
    session = (await raw.request(2, "session/new", {"workspace": str(workspace)}))["result"]
    reply = await raw.request(3, "rules/add", {"sessionId": session["sessionId"],
                                               "rule": "Bash(ls:*)", "scope": "project"})
    error = reply["error"]
    assert error["code"] == -32603 and error["message"].startswith("rules/add failed"), error
    assert "\n" not in error["message"] and "Traceback" not in error["message"]
    assert not error.get("data")
    assert "result" in await raw.request(4, "session/list", {})


async def test_a_flood_of_unknown_methods_is_answered_each_and_logged_a_few(raw, daemon_env):
    await raw.initialize()
    for n in range(300):
        raw.send({"jsonrpc": "2.0", "id": 100 + n, "method": f"nope/{n}" + "x" * 1000,
                  "params": {}})
    replies = [await raw.read() for _ in range(300)]
    assert sorted(r["id"] for r in replies) == list(range(100, 400))
    assert {r["error"]["code"] for r in replies} == {-32601}
    assert "result" in await raw.request(9, "session/list", {})  # and it keeps serving
    log = Path(daemon_env["HEDDLE_LOG_FILE"]).read_text()
    logged = [line for line in log.splitlines() if "Method Not Found" in line]
    assert 1 <= len(logged) <= 5 and all(len(line) < 400 for line in logged)
