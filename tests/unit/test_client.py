"""The terminal client's JSON-RPC connection, against a peer speaking over a real pipe."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import anyio
import pytest

from heddle.client import Connection
from heddle.frames import encode


def frame(payload: dict) -> bytes:
    return encode(json.dumps(payload).encode())


async def pipe_pair():
    """(a StreamReader fed by `feed`, a writer whose bytes land in `sent`)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    read_fd, write_fd = os.pipe()
    transport, protocol = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(write_fd, "wb"))
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return reader, writer, read_fd


async def test_a_request_the_daemon_withdraws_stops_being_answered():
    reader, writer, read_fd = await pipe_pair()
    conn = Connection(reader, writer)
    started, stopped = asyncio.Event(), asyncio.Event()

    async def ask(params):
        started.set()
        try:
            await asyncio.sleep(60)  # a question nobody answers
        finally:
            stopped.set()
        return {"decision": "allowOnce"}

    conn.on_request("permission/request", ask)
    reader.feed_data(frame({"jsonrpc": "2.0", "id": "q1", "method": "permission/request",
                            "params": {}}))
    await asyncio.wait_for(started.wait(), 5)
    reader.feed_data(frame({"jsonrpc": "2.0", "method": "$/cancelRequest",
                            "params": {"id": "q1"}}))
    await asyncio.wait_for(stopped.wait(), 5)

    reader.feed_data(frame({"jsonrpc": "2.0", "id": "q2", "method": "unknown/thing"}))
    os.set_blocking(read_fd, False)
    sent = b""
    with anyio.fail_after(5):
        while b'"q2"' not in sent:  # replies go out in order: q1's would be before q2's
            await anyio.sleep(0.01)
            try:
                sent += os.read(read_fd, 65536)
            except BlockingIOError:
                pass
    writer.close()
    os.close(read_fd)
    assert b'"q1"' not in sent  # withdrawn: no reply
    assert b'"q2"' in sent and b"-32601" in sent  # the connection still answers the rest
    reader.feed_eof()
    await asyncio.wait_for(conn.closed(), 5)


async def test_output_that_is_not_a_message_ends_the_connection_with_the_reason(caplog):
    reader, writer, read_fd = await pipe_pair()
    conn = Connection(reader, writer)
    events = []
    conn.on_notification("turn/event", events.append)
    reader.feed_data(frame({"jsonrpc": "2.0", "method": "turn/event", "params": {"n": 1}}))
    reader.feed_data(b"Traceback (most recent call last):\r\n")  # a stray print on stdout
    await asyncio.wait_for(conn.closed(), 5)
    assert events == [{"n": 1}]
    assert "cannot read the daemon's output" in caplog.text and "Traceback" in caplog.text
    writer.close()
    os.close(read_fd)


async def test_a_daemon_that_never_answers_initialize_is_stopped_and_said_so():
    from heddle import spawn
    silent = [sys.executable, "-c", "import sys, time; print('loading…', file=sys.stderr); "
              "time.sleep(60)"]
    daemon = await spawn.Daemon.start(silent, dict(os.environ))
    try:
        with pytest.raises(ConnectionError):
            await daemon.initialize("test", timeout=0.5)
        assert daemon.proc.returncode is not None or await asyncio.wait_for(daemon.proc.wait(), 10)
        [said] = await daemon.lost()
        assert said == ("heddle: the daemon did not answer `initialize` within 0.5 s, so it was "
                        "stopped (its log may say why)")
    finally:
        await daemon.stop()
