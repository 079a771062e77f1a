"""The server itself: raw HTTP handling, recording, lifecycle, the thread runner and the CLI."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import subprocess
import sys
import time
from pathlib import Path

import anthropic
import httpx2
import pytest

from heddle.scripted import ScenarioError, ScriptedServer, load_scenario

from .conftest import text_step, user


async def _exchange(server: ScriptedServer, *raw: bytes) -> list[tuple[int, dict, bytes]]:
    """Send raw requests over one connection; return (status, headers, body) for each."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    replies = []
    try:
        for request in raw:
            writer.write(request)
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            if head.startswith(b"HTTP/1.1 100"):
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            status_line, *lines = head.decode().split("\r\n")[:-2]
            headers = dict(line.lower().split(": ", 1) for line in lines)
            body = await reader.readexactly(int(headers["content-length"]))
            replies.append((int(status_line.split()[1]), headers, body))
    finally:
        writer.close()
    return replies


def _post(body: bytes, path: str = "/v1/messages", extra: str = "") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n{extra}"
            f"content-length: {len(body)}\r\n\r\n").encode() + body


async def test_unknown_path_is_a_404_in_the_api_error_shape(server: ScriptedServer):
    [(status, headers, body)] = await _exchange(server, b"GET /v1/files HTTP/1.1\r\n\r\n")
    assert status == 404 and headers["content-type"] == "application/json"
    error = json.loads(body)
    assert error["type"] == "error" and error["error"]["type"] == "not_found_error"
    assert "/v1/files" in error["error"]["message"]


async def test_the_models_it_serves_are_its_scenarios(server: ScriptedServer, client):
    assert (await client.models.list()).data == []
    for name in ("s", "a"):
        server.add_scenario(name, {"steps": [text_step("ok")]})
    page = await client.models.list(limit=1)  # one page, whatever the limit
    assert [m.id for m in page.data] == ["a", "s"] and not page.has_more
    assert [r.path for r in server.requests] == ["/v1/models"] * 2


async def test_keep_alive_malformed_json_and_chunked_bodies(server: ScriptedServer):
    server.add_scenario("s", {"steps": [text_step("one"), text_step("two")]})
    good = json.dumps({"model": "s", "max_tokens": 10, "messages": user("hi")}).encode()
    chunked = (b"POST /v1/messages HTTP/1.1\r\ntransfer-encoding: chunked\r\n"
               b"expect: 100-continue\r\n\r\n" + b"%x\r\n%b\r\n0\r\n\r\n" % (len(good), good))
    replies = await _exchange(server, _post(good), _post(b"{not json"), chunked)
    assert [r[0] for r in replies] == [200, 400, 200]
    assert json.loads(replies[0][2])["content"][0]["text"] == "one"
    assert json.loads(replies[1][2])["error"]["type"] == "invalid_request_error"
    assert json.loads(replies[2][2])["content"][0]["text"] == "two"


async def test_malformed_http_gets_400_and_a_closed_connection(server: ScriptedServer):
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"this is not http\r\n\r\n")
    reply = await asyncio.wait_for(reader.read(), 5)  # read() returns at EOF: the server closed
    writer.close()
    assert reply.startswith(b"HTTP/1.1 400 ")
    assert json.loads(reply.split(b"\r\n\r\n", 1)[1])["error"]["type"] == "invalid_request_error"


async def test_client_leaving_mid_stream_does_not_hurt_the_server(server: ScriptedServer, client,
                                                                   caplog):
    server.add_scenario("slow", {"steps": [text_step("a slow reply " * 5, chunk=2, delayMs=20)]})
    server.add_scenario("s", {"steps": [text_step("still here")]})
    with caplog.at_level(logging.WARNING, logger="heddle.scripted"):
        stream = await client.messages.create(model="slow", max_tokens=100,
                                              messages=user("hi"), stream=True)
        async for ev in stream:
            if ev.type == "content_block_delta":
                break
        await stream.close()
        message = await client.messages.create(model="s", max_tokens=100, messages=user("hi"))
        await asyncio.sleep(0.1)  # let the abandoned handler notice
    assert message.content[0].text == "still here"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_stop_closes_open_connections_promptly(server: ScriptedServer, client, caplog):
    server.add_scenario("s", {"steps": [{**text_step("x"), "fault": {"stall": 30,
                                                                      "afterEvents": 1}}]})
    idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", server.port)
    stream = await client.messages.create(model="s", max_tokens=100, messages=user("hi"),
                                          stream=True)
    consume = asyncio.create_task(anext(aiter(stream)))
    await consume
    reading = asyncio.create_task(anext(aiter(stream)))
    started = time.monotonic()
    await server.stop()
    assert time.monotonic() - started < 15  # not the handler's 30 s stall
    with pytest.raises(httpx2.RemoteProtocolError):
        await asyncio.wait_for(reading, 2)
    assert await asyncio.wait_for(idle_reader.read(), 2) == b""  # closed by the server
    idle_writer.close()
    await asyncio.sleep(0)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_requests_are_recorded(server: ScriptedServer, client):
    server.add_scenario("s", {"steps": [text_step("a")]})
    server.add_scenario("t", {"steps": [text_step("b")]})
    await client.messages.create(model="s", max_tokens=10, messages=user("one"),
                                 extra_headers={"X-Custom": "Yes"})
    with pytest.raises(anthropic.BadRequestError):
        await client.messages.create(model="t", max_tokens=10, messages=[])
    await client.messages.create(model="t", max_tokens=10, messages=user("two"), stream=True)
    recorded = server.requests
    assert [(r.scenario, r.step_index, r.status) for r in recorded] == [
        ("s", 0, 200), ("t", None, 400), ("t", 0, 200)]
    assert recorded[0].body == {"model": "s", "max_tokens": 10, "messages": user("one")}
    assert recorded[0].headers["x-custom"] == "Yes"
    assert all(key == key.lower() for key in recorded[0].headers)
    assert recorded[0].at <= recorded[1].at <= recorded[2].at <= time.monotonic()
    assert [r.body["messages"] for r in server.requests_for("t")] == [[], user("two")]
    recorded.clear()
    assert len(server.requests) == 3


def test_run_in_thread_serves_and_stops():
    srv = ScriptedServer({"s": {"steps": [text_step("from a thread")]}})
    with srv.run_in_thread() as running:
        assert running is srv
        url = srv.url
        sync = anthropic.Anthropic(base_url=url, api_key="test", max_retries=0)
        message = sync.messages.create(model="s", max_tokens=10, messages=user("x"))
        srv.add_scenario("later", {"steps": [text_step("added while running")]})
        later = sync.messages.create(model="later", max_tokens=10, messages=user("x"))
        sync.close()
    assert message.content[0].text == "from a thread"
    assert later.content[0].text == "added while running"
    with anthropic.Anthropic(base_url=url, api_key="test", max_retries=0) as after:
        with pytest.raises(anthropic.APIConnectionError):
            after.messages.create(model="s", max_tokens=10, messages=user("x"))


def test_load_scenario_by_name_and_path(tmp_path: Path):
    assert load_scenario("hello").repeat
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"steps": [text_step("x")], "contextWindow": 9}))
    assert load_scenario(path).context_window == 9
    assert load_scenario(str(path)).context_window == 9
    (tmp_path / "typo.json").write_text(json.dumps({"steps": [{"contnt": []}]}))
    with pytest.raises(ScenarioError, match=r"unknown field `contnt`"):
        load_scenario(tmp_path / "typo.json")
    with pytest.raises(ScenarioError, match="no-such-scenario"):
        load_scenario("no-such-scenario")
    with pytest.raises(ScenarioError, match="exactly one of"):
        ScriptedServer({"bad": {"steps": [{"fault": {"drop": True, "status": 500}}]}})
    (tmp_path / "typo.json").unlink()
    srv = ScriptedServer()
    assert srv.load_dir(tmp_path) == ["mine"]
    assert srv.cursor("mine") == 0


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-I", "-m", "heddle.scripted", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_cli_serves_until_signalled(tmp_path: Path, sig: signal.Signals):
    (tmp_path / "mine.json").write_text(json.dumps({"steps": [text_step("from a file")]}))
    proc = _spawn("--port", "0", "--scenario", str(tmp_path / "mine.json"))
    try:
        line = proc.stdout.readline()
        assert line.startswith("listening on http://127.0.0.1:"), proc.stderr.read()
        sync = anthropic.Anthropic(base_url=line.split()[-1], api_key="test", max_retries=0)
        assert sync.messages.create(model="mine", max_tokens=10, messages=user("x")) \
            .content[0].text == "from a file"
        assert sync.messages.create(model="hello", max_tokens=10, messages=user("x")) \
            .content[0].text == "Hello from the scripted model."
        sync.close()
        proc.send_signal(sig)
        assert proc.wait(timeout=5) == 0
        assert proc.stdout.read() == ""  # exactly one line on stdout
        assert "model=mine" in proc.stderr.read()
    finally:
        proc.kill()
        proc.communicate()


def test_cli_rejects_a_bad_scenario(tmp_path: Path):
    (tmp_path / "bad.json").write_text("{")
    proc = _spawn("--scenario", str(tmp_path / "bad.json"))
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 2 and out == ""
    assert "not valid JSON" in err


def test_cli_says_in_one_line_that_the_port_is_taken():
    with ScriptedServer().run_in_thread() as first:
        port = first.port
        proc = _spawn("--port", str(port))
        out, err = proc.communicate(timeout=10)
    assert proc.returncode == 1 and out == ""
    assert err == f"error: cannot listen on 127.0.0.1:{port}: address already in use\n"


def test_run_in_thread_reports_a_failed_start():
    with ScriptedServer().run_in_thread() as first:
        with pytest.raises(OSError), ScriptedServer(port=first.port).run_in_thread():
            pass
