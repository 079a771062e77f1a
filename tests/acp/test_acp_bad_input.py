"""Hostile input on the ACP door: clear JSON-RPC errors, and the agent keeps serving."""

from __future__ import annotations

import asyncio
import json

import pytest

from acp_harness import AGENT


async def start(env, cwd):
    return await asyncio.create_subprocess_exec(
        *AGENT, env=env, cwd=cwd, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, limit=1 << 24)


async def answer(proc) -> dict:
    line = await asyncio.wait_for(proc.stdout.readline(), 30)
    assert line, "the agent closed stdout"
    return json.loads(line)


async def test_bad_lines_are_answered_and_the_agent_keeps_serving(daemon_env, workspace):
    proc = await start(daemon_env, workspace)
    try:
        sends = [
            b"{not json\n",
            b"[1, 2]\n",
            b"42\n",
            b'{"jsonrpc": "2.0", "id": 1, "method": 7}\n',
            b'{"jsonrpc": "2.0", "id": 2, "method": "no/such"}\n',
            b'{"jsonrpc": "2.0", "id": 3, "method": "session/new", "params": {"cwd": 5, "mcpServers": []}}\n',
            b'{"jsonrpc": "2.0", "id": 4, "method": "session/new", "params": {"cwd": "relative", "mcpServers": []}}\n',
            b'{"jsonrpc": "2.0", "id": 5, "method": "session/prompt", "params": {"sessionId": "nope", "prompt": []}}\n',
            b"\xff\xfe garbage\n",
            b'{"jsonrpc": "2.0", "id": 6, "method": "initialize", "params": {"protocolVersion": 1}}\n',
        ]
        for line in sends:
            proc.stdin.write(line)
        await proc.stdin.drain()
        answers = [await answer(proc) for _ in sends]
        by_id = {a.get("id"): a for a in answers if a.get("id") is not None}
        unnamed = [a["error"]["code"] for a in answers if a.get("id") is None]
        assert sorted(unnamed) == [-32700, -32700, -32600, -32600]
        assert by_id[1]["error"]["code"] == -32600
        assert by_id[2]["error"]["code"] == -32601
        assert by_id[3]["error"]["code"] == -32602 and "cwd" in json.dumps(by_id[3]["error"])
        assert by_id[4]["error"]["code"] == -32602 and "absolute" in by_id[4]["error"]["message"]
        assert by_id[5]["error"]["code"] == -32002
        assert by_id[6]["result"]["agentInfo"]["name"] == "heddle"
        assert proc.returncode is None
    finally:
        proc.stdin.close()
        await asyncio.wait_for(proc.wait(), 15)
    assert proc.returncode == 0


async def test_regular_files_as_stdin_and_stdout(daemon_env, workspace, tmp_path):
    requests, answers = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    requests.write_bytes(b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", '
                         b'"params": {"protocolVersion": 1}}\n{bad\n')
    with open(requests, "rb") as stdin, open(answers, "wb") as stdout:
        proc = await asyncio.create_subprocess_exec(*AGENT, env=daemon_env, cwd=workspace,
                                                    stdin=stdin, stdout=stdout,
                                                    stderr=asyncio.subprocess.DEVNULL)
        code = await asyncio.wait_for(proc.wait(), 30)
    assert code == 0
    got = sorted((json.loads(line) for line in answers.read_text().splitlines()),
                 key=lambda a: str(a.get("id")))
    assert got[0]["result"]["agentInfo"]["name"] == "heddle"
    assert got[1]["error"]["code"] == -32700


async def test_dev_null_as_stdin_is_an_immediate_end(daemon_env, workspace):
    proc = await asyncio.create_subprocess_exec(*AGENT, env=daemon_env, cwd=workspace,
                                                stdin=asyncio.subprocess.DEVNULL,
                                                stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.DEVNULL)
    out, _ = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0 and out == b""


async def test_a_cwd_with_a_nul_is_invalid_params_and_the_agent_keeps_serving(daemon_env,
                                                                             workspace):
    proc = await start(daemon_env, workspace)
    try:
        for msg_id, cwd in [(1, f"{workspace}\u0000x"), (2, str(workspace))]:
            proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "session/new",
                                         "params": {"cwd": cwd, "mcpServers": []}}).encode() + b"\n")
        await proc.stdin.drain()
        refused, opened = await answer(proc), await answer(proc)
        assert refused["id"] == 1 and refused["error"]["code"] == -32602
        assert refused["error"]["message"] == (
            f"invalid params: workspace {str(workspace) + chr(0) + 'x'!r} is no path: "
            "it holds a NUL - at `$.cwd`")
        assert opened["id"] == 2 and opened["result"]["sessionId"]
    finally:
        proc.stdin.close()
        await asyncio.wait_for(proc.wait(), 15)
    assert proc.returncode == 0


@pytest.mark.parametrize("name, value, why", [
    ("HEDDLE_LOG_LEVEL", "LOUD",
     "HEDDLE_LOG_LEVEL must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL, not 'LOUD'"),
    ("ANTHROPIC_BASE_URL", "notaurl", "ANTHROPIC_BASE_URL is not an http(s) URL: 'notaurl'")])
async def test_a_bad_setting_stops_the_agent_with_one_line(daemon_env, workspace, name, value,
                                                           why):
    proc = await asyncio.create_subprocess_exec(
        *AGENT, env={**daemon_env, name: value}, cwd=workspace,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 1 and out == b""
    (line,) = err.decode().splitlines()
    assert line.endswith(f"heddle acp stopped: {why}")
