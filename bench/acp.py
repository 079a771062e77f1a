"""The ACP door (`python -I -m heddle acp`) measured like the LSP daemon: start-up, warm turn
overhead, the 200 KB answer's wall time and notification count, memory, and what the ACP SDK
costs to import. A lean newline-JSON client dates every message as its line is read, so what
is measured is the agent plus the pipe (the SDK's own client would add its pydantic parsing).
"""

from __future__ import annotations

import asyncio
import itertools
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

from bench import scenarios as sc
from bench.daemon import cpu_seconds, daemon_env, memory
from bench.model import text_arrivals

MB = 1024 * 1024
_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode


class Agent:
    """`heddle acp` over real stdio; permission requests are answered allow once."""

    def __init__(self, proc: asyncio.subprocess.Process, spawned_at: float):
        self.proc = proc
        self.pid = proc.pid
        self.spawned_at = spawned_at
        self.updates: list[tuple[float, dict[str, Any]]] = []
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._reader = asyncio.ensure_future(self._read())

    @classmethod
    async def spawn(cls, env: dict[str, str], cwd: Path, stderr: Path) -> Agent:
        at = time.monotonic()
        with open(stderr, "ab") as err:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-I", "-m", "heddle", "acp", env=env, cwd=cwd,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=err,
                limit=64 * MB)
        return cls(proc, at)

    def send(self, method: str, params: Any) -> tuple[float, asyncio.Future]:
        id_ = next(self._ids)
        future = asyncio.get_running_loop().create_future()
        self._pending[id_] = future
        self.proc.stdin.write(_encode({"jsonrpc": "2.0", "id": id_, "method": method,
                                       "params": params}) + b"\n")
        return time.monotonic(), future

    async def request(self, method: str, params: Any, timeout: float = 120) -> tuple[Any, float]:
        _, future = self.send(method, params)
        return await asyncio.wait_for(future, timeout)

    async def _read(self) -> None:
        while line := await self.proc.stdout.readline():
            now = time.monotonic()
            msg = _decode(line)
            if "method" in msg and "id" in msg:  # the agent asks: allow
                self.proc.stdin.write(_encode({"jsonrpc": "2.0", "id": msg["id"], "result": {
                    "outcome": {"outcome": "selected", "optionId": "allow_once"}}}) + b"\n")
            elif msg.get("method") == "session/update":
                self.updates.append((now, msg["params"]["update"]))
            elif (future := self._pending.pop(msg.get("id"), None)) is not None:
                if "error" in msg:
                    future.set_exception(RuntimeError(msg["error"]["message"]))
                else:
                    future.set_result((msg.get("result"), now))

    def memory(self) -> dict[str, int]:
        return memory(self.pid)

    def cpu(self) -> float:
        return cpu_seconds(self.pid)

    async def close(self) -> None:
        self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 15)
        except asyncio.TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        self._reader.cancel()


async def spawn(rig, key: str, spec: dict[str, Any]) -> tuple[Agent, str]:
    """A fresh agent past initialize with a session on scenario `key` (the model, by
    HEDDLE_MODEL: ACP's session/new names none) and one warm-up turn done."""
    rig.model.add(key, spec)
    rig._spawned += 1
    state = rig.dir / f"acp-state-{rig._spawned}"
    state.mkdir()
    ws = rig.workspace()
    agent = await Agent.spawn(daemon_env(rig.proxy.url, state, {"HEDDLE_MODEL": key}),
                              rig.dir, state / "stderr.log")
    await agent.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    session, _ = await agent.request("session/new", {"cwd": str(ws), "mcpServers": []})
    return agent, session["sessionId"]


async def prompt(agent: Agent, session: str, text: str) -> tuple[float, float, dict]:
    sent, future = agent.send("session/prompt", {"sessionId": session,
                                                 "prompt": [{"type": "text", "text": text}]})
    result, at = await asyncio.wait_for(future, 120)
    return sent, at, result


def messages_sent(exchanges):
    return [e for e in exchanges if e.line.startswith(b"POST /v1/messages ")]


async def group(rig) -> tuple[dict[str, Any], dict[str, bool]]:
    sizes, proxy = rig.sizes, rig.proxy
    out: dict[str, Any] = {}
    checks: dict[str, bool] = {}

    # start-up and warm turns: one agent
    rig.model.add("acp-text", sc.single_text(sizes))
    state = rig.dir / f"acp-state-cold-{rig._spawned}"
    state.mkdir()
    ws = rig.workspace()
    agent = await Agent.spawn(daemon_env(rig.proxy.url, state, {"HEDDLE_MODEL": "acp-text"}),
                              rig.dir, state / "stderr.log")
    try:
        _, at = await agent.request("initialize", {"protocolVersion": 1,
                                                   "clientCapabilities": {}})
        out["acp.cold_start.initialize_s"] = at - agent.spawned_at
        out["acp.cold_start.initialize_cpu_s"] = agent.cpu()
        out["acp.cold_start.initialize_rss_mb"] = agent.memory().get("VmRSS", 0) / MB
        session, _ = await agent.request("session/new", {"cwd": str(ws), "mcpServers": []})
        sid = session["sessionId"]
        await prompt(agent, sid, "warm up")
        latencies, walls, cpus, counts = [], [], [], []
        for _ in range(sizes.warm_turns):
            proxy.reset()
            before, cpu = len(agent.updates), agent.cpu()
            sent, at, result = await prompt(agent, sid, "hello again")
            calls = messages_sent(proxy.exchanges)
            latencies.append((calls[0].request_at - sent) * 1000)
            walls.append((at - sent - sum(e.server_s or 0 for e in calls)) * 1000)
            cpus.append((agent.cpu() - cpu) * 1000)
            counts.append(len(agent.updates) - before)
            checks["acp text: end_turn"] = checks.get("acp text: end_turn", True) and \
                result["stopReason"] == "end_turn"
        out["acp.warm.prompt_to_request_ms"] = latencies
        out["acp.text.daemon_ms"] = walls
        out["acp.text.daemon_cpu_ms"] = cpus
        out["acp.text.notifications"] = counts
        out["acp.text.peak_rss_mb"] = agent.memory().get("VmHWM", 0) / MB
    finally:
        await agent.close()

    # the 200 KB answer in 5,000 deltas
    agent, sid = await spawn(rig, "acp-stream", sc.stream(sizes.stream_chars,
                                                          sizes.stream_deltas))
    try:
        await prompt(agent, sid, "warm up")
        # measured in a session of its own, as on the LSP door: with the warm-up's 200 KB in
        # its conversation the answer would be cut by the context window (`max_tokens`)
        sid = (await agent.request("session/new", {"cwd": str(rig.workspace()),
                                                   "mcpServers": []}))[0]["sessionId"]
        proxy.reset()
        proxy.record = True
        before, cpu = len(agent.updates), agent.cpu()
        sent, at, result = await prompt(agent, sid, "run the stream scenario")
        cpu = agent.cpu() - cpu
        mem = agent.memory()
    finally:
        proxy.record = False
        await agent.close()
    calls = messages_sent(proxy.exchanges)
    updates = [u for _, u in agent.updates[before:]]
    chunks = [u for u in updates if u["sessionUpdate"] == "agent_message_chunk"]
    server_s = sum(e.server_s or 0 for e in calls)
    text = "".join(u["content"]["text"] for u in chunks)
    out["acp.stream.wall_ms"] = (at - sent) * 1000
    out["acp.stream.overhead_ms"] = (at - sent - server_s) * 1000
    out["acp.stream.daemon_cpu_ms"] = cpu * 1000
    out["acp.stream.model_calls"] = len(calls)
    out["acp.stream.notifications"] = len(updates)
    out["acp.stream.message_chunks"] = len(chunks)
    deltas = sum(len(text_arrivals(ex)) for ex in calls)
    out["acp.stream.model_deltas"] = deltas
    out["acp.stream.notification_reduction_x"] = deltas / max(1, len(chunks))
    out["acp.stream.peak_rss_mb"] = mem.get("VmHWM", 0) / MB
    checks["acp stream: end_turn"] = result["stopReason"] == "end_turn"
    checks["acp stream: every character arrived"] = len(text) >= sizes.stream_chars
    out.update(sdk_import())
    return out, checks


SDK_IMPORT = """
import resource, sys, time
if sys.argv[1] == "pydantic-first":
    import pydantic, pydantic_core  # `heddle serve` imports these anyway, with the model SDK
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
import acp.agent.router, acp.connection, acp.schema, acp.exceptions
print((time.perf_counter() - t) * 1000, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss) / 1024)
"""


def sdk_import() -> dict[str, float]:
    """What importing the ACP SDK costs a fresh interpreter: with pydantic (which the SDK
    brings in first, at start-up) and with pydantic already loaded (the SDK's own share)."""
    out = {}
    for how, name in (("cold", "acp.sdk_import_ms"), ("pydantic-first", "acp.sdk_own_import_ms")):
        got = subprocess.run([sys.executable, "-I", "-c", SDK_IMPORT, how], capture_output=True,
                             text=True, timeout=60, check=True).stdout.split()
        out[name] = float(got[0])
        out[name.replace("_ms", "_rss_mb")] = float(got[1])
    return out


METRICS = {
    "acp.cold_start.initialize_s": ("ACP door: spawn → initialize result", ("<=", 0.5)),
    "acp.cold_start.initialize_cpu_s": ("…CPU time the agent used until then", None),
    "acp.cold_start.initialize_rss_mb": ("…its RSS then", None),
    "acp.warm.prompt_to_request_ms": ("session/prompt → first model request, warm agent", ("<=", 5)),
    "acp.text.daemon_ms": ("single text answer: session/prompt → result, minus the model server's time", None),
    "acp.text.daemon_cpu_ms": ("…CPU time the agent used (10 ms ticks)", None),
    "acp.text.notifications": ("…session/update notifications per turn", None),
    "acp.text.peak_rss_mb": ("…peak RSS of the agent", ("<=", 120)),
    "acp.stream.wall_ms": ("200 KB answer in 5,000 deltas: session/prompt → result", None),
    "acp.stream.overhead_ms": ("…wall minus the server's own time", ("<=", 100)),
    "acp.stream.daemon_cpu_ms": ("…CPU time the agent used (10 ms ticks)", None),
    "acp.stream.model_calls": ("…model calls", None),
    "acp.stream.model_deltas": ("…text deltas the model sent", None),
    "acp.stream.notifications": ("…session/update notifications the client got", None),
    "acp.stream.message_chunks": ("…agent_message_chunk notifications", None),
    "acp.stream.notification_reduction_x": ("…model deltas per agent_message_chunk", (">=", 10)),
    "acp.stream.peak_rss_mb": ("…peak RSS of the agent", ("<=", 120)),
    "acp.sdk_import_ms": ("importing the ACP SDK in a fresh interpreter (pydantic included)", None),
    "acp.sdk_import_rss_mb": ("…RSS it adds", None),
    "acp.sdk_own_import_ms": ("…with pydantic loaded first (the SDK's own share)", None),
    "acp.sdk_own_import_rss_mb": ("…RSS it adds", None),
}

DOORS = [
    ("spawn → initialize result (s)", "cold_start.initialize_s", "acp.cold_start.initialize_s"),
    ("turn start → first model request, warm (ms)", "warm.turn_start_to_request_ms",
     "acp.warm.prompt_to_request_ms"),
    ("single text answer: per-turn overhead (ms)", "text.daemon_ms", "acp.text.daemon_ms"),
    ("…CPU per turn (ms)", "text.daemon_cpu_ms", "acp.text.daemon_cpu_ms"),
    ("…notifications per turn", "text.notifications", "acp.text.notifications"),
    ("200 KB answer: overhead (ms)", "stream.overhead_ms", "acp.stream.overhead_ms"),
    ("…CPU (ms)", "stream.daemon_cpu_ms", "acp.stream.daemon_cpu_ms"),
    ("…notifications", "stream.notifications", "acp.stream.notifications"),
    ("…text notifications", "stream.text_notifications", "acp.stream.message_chunks"),
    ("…peak RSS (MB)", "stream.peak_rss_mb", "acp.stream.peak_rss_mb"),
]
"""(what, the LSP door's metric, the ACP door's): the two doors side by side (medians)."""

