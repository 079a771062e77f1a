"""The ACP door fuzzed with the params a client might invent: every method, its valid params
mutated at random (a field dropped, given another type, a huge or strange value, an extra one).
Every request is answered — a result, or a JSON-RPC error that says what was wrong, never an
internal error — nothing is logged as a traceback, and the agent still serves a good request
afterwards. Seeded: a failure names its seed, and `MUTATIONS` replays it."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

from acp_harness import AGENT

SEEDS = range(40)
PER_SEED = 40
STRANGE: list[Any] = [None, True, 0, -1, 2 ** 63, 1.5, "", "x" * 70_000, "\u0000\ud7ff\U0001f600",
                      "../../etc/passwd", "/", [], [None], {}, {"type": "text"}, [[[[[]]]]],
                      {"$ref": "#"}, "session/prompt"]
ALLOWED = {-32700, -32600, -32601, -32602, -32002, -32001, -32000}
"""Parse error, invalid request, unknown method, bad params, unknown resource, busy (a prompt
while the session's last one runs), auth needed."""


def templates(cwd: str, session: str) -> list[tuple[str, dict[str, Any]]]:
    text = {"type": "text", "text": "hi"}
    link = {"type": "resource_link", "uri": f"file://{cwd}/app.py", "name": "app.py"}
    embedded = {"type": "resource", "resource": {"uri": f"file://{cwd}/x.py", "text": "x = 1"}}
    return [
        ("initialize", {"protocolVersion": 1, "clientCapabilities": {
            "fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}}),
        ("authenticate", {"methodId": "none"}),
        ("session/new", {"cwd": cwd, "mcpServers": []}),
        ("session/load", {"sessionId": session, "cwd": cwd, "mcpServers": []}),
        ("session/resume", {"sessionId": session, "cwd": cwd, "mcpServers": []}),
        ("session/list", {"cwd": cwd}),
        ("session/prompt", {"sessionId": session, "prompt": [text, link, embedded]}),
        ("session/set_mode", {"sessionId": session, "modeId": "plan"}),
        ("session/close", {"sessionId": "not-" + session}),
        ("session/fork", {"sessionId": session, "cwd": cwd}),
        ("session/set_model", {"sessionId": session, "modelId": "m"}),
        ("no/such", {}),
    ]


def mutate(rng: random.Random, value: Any, depth: int = 0) -> Any:
    """`value` with one thing changed somewhere in it."""
    if isinstance(value, dict) and value and depth < 4 and rng.random() < 0.8:
        key = rng.choice(sorted(value))
        out = dict(value)
        what = rng.random()
        if what < 0.2:
            del out[key]
        elif what < 0.3:
            out[rng.choice(["_meta", "extra", key + "X"])] = rng.choice(STRANGE)
        elif what < 0.6:
            out[key] = rng.choice(STRANGE)
        else:
            out[key] = mutate(rng, value[key], depth + 1)
        return out
    if isinstance(value, list) and value and depth < 4 and rng.random() < 0.8:
        out = list(value)
        i = rng.randrange(len(out))
        out[i] = mutate(rng, out[i], depth + 1) if rng.random() < 0.7 else rng.choice(STRANGE)
        return out
    return rng.choice(STRANGE)


def mutations(seed: int, cwd: str, session: str) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    sent = []
    for n in range(PER_SEED):
        method, params = rng.choice(templates(cwd, session))
        params = mutate(rng, params) if rng.random() < 0.9 else params
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": n + 10, "method": method}
        if rng.random() < 0.95:
            message["params"] = params
        sent.append(message)
    return sent


async def answers(proc, count: int, timeout: float = 45) -> dict[Any, dict]:
    got: dict[Any, dict] = {}
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while len(got) < count:
        line = await asyncio.wait_for(proc.stdout.readline(), max(0.1, end - loop.time()))
        assert line, f"the agent closed stdout after {len(got)} answers"
        message = json.loads(line)
        if "id" in message and "method" not in message:
            got[message["id"]] = message
        elif "method" in message and "id" in message:  # a request of the agent's: refuse it
            proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": {
                "code": -32601, "message": "not here"}}).encode() + b"\n")
    return got


async def test_mutated_params_of_every_method_are_answered_clearly(
        daemon_env, workspace, scripted, tmp_path):
    scripted.add_scenario("fuzz", {"steps": [{"content": [{"type": "text", "text": "ok"}]}]
                                   * (PER_SEED * len(SEEDS))})
    stderr = (tmp_path / "agent-stderr.txt").open("wb")
    proc = await asyncio.create_subprocess_exec(
        *AGENT, env={**daemon_env, "HEDDLE_MODEL": "fuzz"}, cwd=workspace,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=stderr,
        limit=1 << 24)
    try:
        def send(message: dict) -> None:
            proc.stdin.write(json.dumps(message).encode() + b"\n")
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
        send({"jsonrpc": "2.0", "id": 2, "method": "session/new",
              "params": {"cwd": str(workspace), "mcpServers": []}})
        opened = await answers(proc, 2)
        session = opened[2]["result"]["sessionId"]
        for seed in SEEDS:
            sent = mutations(seed, str(workspace), session)
            for message in sent:
                send(message)
            await proc.stdin.drain()
            got = await answers(proc, len(sent))
            for message in sent:
                answer = got[message["id"]]
                assert "result" in answer or answer["error"]["code"] in ALLOWED, \
                    f"seed {seed}: {json.dumps(message)[:600]} → {json.dumps(answer)[:600]}"
                if "error" in answer:
                    assert answer["error"]["message"], f"seed {seed}: an error without a message"
                if answer.get("error", {}).get("code") == -32001:
                    assert "session/cancel" in answer["error"]["message"]
            assert proc.returncode is None, f"seed {seed}: the agent died"
        # still serving: a good prompt in the first session is answered
        send({"jsonrpc": "2.0", "id": 999, "method": "session/prompt", "params": {
            "sessionId": session, "prompt": [{"type": "text", "text": "still there?"}]}})
        last = await answers(proc, 1)
        assert last[999]["result"]["stopReason"] in ("end_turn", "cancelled"), last
    finally:
        if proc.stdin and not proc.stdin.is_closing():
            proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 20)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            stderr.close()
    logged = (tmp_path / "agent-stderr.txt").read_text(errors="replace")
    logged += Path(daemon_env["HEDDLE_LOG_FILE"]).read_text(errors="replace")
    assert "Traceback" not in logged, logged[logged.find("Traceback") - 2000:][:6000]
    assert proc.returncode == 0
