"""Bytes that are no message, on the ACP door's real stdin: the corpus the LSP-style door is
tested with (tests/fuzzframes.py, tests/e2e/test_bad_framing.py), as lines. Each bad line is
answered with a JSON-RPC error (`-32700` parse error, `-32600` invalid request), a request after
it is still served, and the end of stdin still ends the agent, with the reason in the log."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from acp_harness import AGENT
from fuzzframes import stream
from heddle.rpc.framing import MAX_DEPTH


SEEDS = (1, 2)
CASES = 60
ANSWERED = (-32700, -32600, -32601, -32602, -32002)
"""Parse error, invalid request, unknown method, invalid params, no such session: never an
internal error."""


class Agent:
    """`heddle acp` over raw pipes; stderr to a file (a pipe nobody reads would stall it)."""

    def __init__(self, proc: asyncio.subprocess.Process, log: Path, stderr: Path):
        self.proc, self.log_path, self.stderr_path = proc, log, stderr

    def send(self, data: bytes) -> None:
        self.proc.stdin.write(data)

    async def read(self, timeout: float = 20) -> dict:
        line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        assert line, "the agent closed stdout"
        return json.loads(line)

    async def reply_to(self, msg_id, timeout: float = 20) -> dict:
        """The answer to request `msg_id`, past the answers to the bad lines before it."""
        async def find():
            while True:
                answer = await self.read(timeout)
                assert answer.get("jsonrpc") == "2.0" and "method" not in answer, answer
                if answer.get("id") == msg_id:
                    return answer
                if "error" in answer:  # (a message of the corpus may be valid: its result)
                    assert answer["error"]["code"] in ANSWERED, answer
                    assert answer["error"]["message"], answer
        return await asyncio.wait_for(find(), timeout)

    async def works(self, msg_id) -> None:
        self.send(json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "session/list",
                              "params": {}}).encode() + b"\n")
        reply = await self.reply_to(msg_id)
        assert "sessions" in reply.get("result", {}), reply

    async def ends(self) -> None:
        """stdin closed: the agent exits 0, within a bound, having logged why."""
        self.proc.stdin.close()
        # (seconds; generous for a machine busy enough that a cold start takes 15 s)
        assert await asyncio.wait_for(self.proc.wait(), 40) == 0
        log = self.log_path.read_text(errors="replace")
        assert "stopping: stdin closed" in log
        assert "Traceback" not in log + self.stderr_path.read_text(errors="replace")


@pytest.fixture
async def raw(daemon_env, workspace, tmp_path):
    stderr = tmp_path / "acp.stderr"
    with open(stderr, "wb") as err:
        proc = await asyncio.create_subprocess_exec(
            *AGENT, env=daemon_env, cwd=workspace, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=err, limit=1 << 24)
    agent = Agent(proc, Path(daemon_env["HEDDLE_LOG_FILE"]), stderr)
    yield agent
    if proc.returncode is None:
        proc.kill()
    await asyncio.wait_for(proc.stdout.read(), 10)
    await asyncio.wait_for(proc.wait(), 10)


def initialize(msg_id) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "initialize",
                       "params": {"protocolVersion": 1}}).encode() + b"\n"


async def test_invalid_utf8_in_a_string_is_a_parse_error_before_and_after_initialize(raw):
    bad = b'{"jsonrpc":"2.0","id":7,"method":"session/list","params":{"a":"\xff"}}\n'
    raw.send(bad + initialize(1))  # the first line while the agent is still starting
    first = await raw.read()
    assert first["id"] is None and first["error"]["code"] == -32700
    assert "utf-8" in first["error"]["message"]
    assert "result" in await raw.reply_to(1)
    for sequence in (b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80"):
        raw.send(b'{"jsonrpc":"2.0","id":8,"method":"session/list","params":{"a":"'
                 + sequence + b'"}}\n')
        reply = await raw.read()
        assert reply["id"] is None and reply["error"]["code"] == -32700, (sequence, reply)
    await raw.works(2)
    await raw.ends()


async def test_deep_nesting_is_refused_and_the_end_of_stdin_still_ends_the_agent(raw):
    raw.send(initialize(1))
    assert "result" in await raw.reply_to(1)
    for depth in (999, 100_000):
        raw.send(b"[" * depth + b"]" * depth + b"\n")
        reply = await raw.read()
        assert reply["id"] is None and reply["error"]["code"] == -32600, reply
        assert f"more than {MAX_DEPTH} levels" in reply["error"]["message"]
    deep = b"[" * MAX_DEPTH + b"]" * MAX_DEPTH
    raw.send(b'{"jsonrpc":"2.0","id":4,"method":"session/list","params":{"x":%s}}\n' % deep)
    reply = await raw.read()
    assert reply["id"] == 4 and reply["error"]["code"] == -32600, reply
    await raw.works(5)
    await raw.ends()


@pytest.mark.timeout(120)
async def test_the_lsp_doors_fuzz_corpus_as_lines(raw):
    """The LSP door's seeded adversarial streams (mutated frames, NULs, CR-only line ends,
    invalid UTF-8, deep nesting, non-objects, batches, noise), cut into lines here; after
    each a request must be answered. A failure replays with fuzzframes.stream(case)."""
    raw.send(stream(10_001, pieces=30) + b"\n" + initialize("init"))
    assert "agentInfo" in (await raw.reply_to("init", timeout=30))["result"]
    cases = [100_000 * seed + i for seed in SEEDS for i in range(CASES)]

    async def write():
        for case in cases:
            raw.send(stream(case) + b"\n" + json.dumps({
                "jsonrpc": "2.0", "id": f"probe-{case}", "method": "session/list",
                "params": {}}).encode() + b"\n")
            await raw.proc.stdin.drain()  # (while the agent reads: it holds back otherwise)

    writing = asyncio.ensure_future(write())
    try:
        for case in cases:
            reply = await raw.reply_to(f"probe-{case}")
            assert "sessions" in reply.get("result", {}), (case, reply)
        await asyncio.wait_for(writing, 20)
    finally:
        writing.cancel()
    await raw.ends()
