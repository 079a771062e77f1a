"""The measurements. Each function runs one repetition and returns {metric: value or samples}.

Every measured daemon is fresh unless said otherwise, so its peak RSS (VmHWM) belongs to the
one scenario it ran. Before a scenario's turn, one short turn in another session loads the
model SDK, as it would be in an editor that has been open for a while.
"""

from __future__ import annotations

import asyncio
import bisect
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import scenarios as sc
from bench.daemon import Daemon, daemon_env
from bench.model import Exchange, ModelServer, StampingProxy, text_arrivals

MB = 1024 * 1024


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


class Rig:
    """The scripted model process, the proxy in front of it, and a scratch directory."""

    def __init__(self, sizes: sc.Sizes, profile: Path | None = None):
        self.sizes = sizes
        self.profile = profile
        self.group = ""
        self.shared: Daemon | None = None
        """With `sizes.fresh_daemons` off (quick runs): the one daemon every group uses."""
        self.model = ModelServer()
        self.proxy: StampingProxy | None = None
        self._tmp = tempfile.TemporaryDirectory(prefix="heddle-bench-")
        self.dir = Path(self._tmp.name)
        self._spawned = 0

    async def __aenter__(self) -> Rig:
        url = self.model.start()
        host, port = url.rsplit("/", 1)[1].split(":")
        self.proxy = StampingProxy(host, int(port))
        await self.proxy.start()
        self.model.add("hello", sc.HELLO)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.shared is not None:
            await self.shared.shutdown()
        if self.proxy is not None:
            await self.proxy.stop()
        self.model.stop()
        self._tmp.cleanup()

    def workspace(self) -> Path:
        return sc.make_workspace(self.dir / "ws", 30)

    async def daemon(self) -> Daemon:
        self._spawned += 1
        state = self.dir / f"state-{self._spawned}"
        state.mkdir()
        assert self.proxy is not None
        # py-spy attaches with ptrace, which a daemon that is not dumpable refuses
        extra = {"HEDDLE_DUMPABLE": "1"} if self.profile is not None else None
        d = await Daemon.spawn(daemon_env(self.proxy.url, state, extra), self.dir,
                               state / "stderr.log")
        if self.profile is not None and self.group.startswith("lifecycle"):
            await self.start_profiler(d, "life")
        return d

    async def start_profiler(self, d: Daemon, what: str) -> asyncio.subprocess.Process | None:
        """py-spy (if installed) samples the daemon until it exits or is interrupted."""
        if self.profile is None:
            return None
        spy = shutil.which("py-spy", path=os.pathsep.join([str(Path(sys.executable).parent),
                                                           os.environ.get("PATH", "")]))
        if spy is None:
            log("--profile: py-spy is not installed; not profiling")
            self.profile = None
            return None
        self.profile.mkdir(parents=True, exist_ok=True)
        out = self.profile / f"{self.group or 'daemon'}-{what}.txt"
        proc = await asyncio.create_subprocess_exec(
            spy, "record", "--pid", str(d.pid), "--rate", "1000", "--format", "raw",
            "--threads", "--nonblocking", "-o", str(out),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        await asyncio.sleep(0.3)  # let it attach
        return proc

    @staticmethod
    async def stop_profiler(proc: asyncio.subprocess.Process | None) -> None:
        if proc is not None and proc.returncode is None:
            proc.send_signal(signal.SIGINT)
            await asyncio.wait_for(proc.wait(), 30)

    async def warm_daemon(self, workspace: Path) -> Daemon:
        """A daemon past initialize whose model SDK is loaded (one short turn done)."""
        if self.shared is not None:
            return self.shared
        d = await self.daemon()
        await d.initialize()
        warm = await d.new_session(workspace, "hello")
        _, done = d.start_turn(warm, "warm up")
        await asyncio.wait_for(done, 60)
        if not self.sizes.fresh_daemons:
            self.shared = d
        return d

    async def release(self, d: Daemon) -> None:
        if d is not self.shared:
            await d.shutdown()


async def turn(d: Daemon, session: str, prompt: str, timeout: float = 120
               ) -> tuple[float, float, dict[str, Any]]:
    sent, future = d.start_turn(session, prompt)
    result, at = await asyncio.wait_for(future, timeout)
    return sent, at, result


def seq_ok(d: Daemon, turn_id: str) -> bool:
    seqs = [e.seq for e in d.turn_events(turn_id)]
    return seqs == list(range(len(seqs)))


def tool_gaps(exchanges: list[Exchange], events, tool_ids: list[list[str]]) -> list[float]:
    """Per model call after a tool round: its first request byte minus the moment the client
    had the round's last toolCallFinished (ms)."""
    finished = {e.params["event"].get("toolCallId"): e.at for e in events
                if e.kind == "toolCallFinished"}
    gaps = []
    for k in range(1, len(exchanges)):
        ids = tool_ids[k - 1] if k - 1 < len(tool_ids) else []
        ats = [finished[i] for i in ids if i in finished]
        if ats and len(ats) == len(ids):
            gaps.append((exchanges[k].request_at - max(ats)) * 1000)
    return gaps


def messages_sent(exchanges: list[Exchange]) -> list[Exchange]:
    return [e for e in exchanges if e.line.startswith(b"POST /v1/messages ")]


# -- cold start, warm turns, idle sessions (one daemon) ---------------------------------------

async def lifecycle(rig: Rig) -> dict[str, Any]:
    sizes, proxy = rig.sizes, rig.proxy
    ws = rig.workspace()
    proxy.reset()
    d = await rig.daemon()
    out: dict[str, Any] = {}
    try:
        init_at = await d.initialize(initialized=False)
        out["cold_start.initialize_s"] = init_at - d.spawned_at
        out["cold_start.initialize_cpu_s"] = d.cpu()
        d.notify("initialized", {})
        session = await d.new_session(ws, "hello")
        _, first = d.start_turn(session, "hello")
        await asyncio.wait_for(first, 60)
        calls = messages_sent(proxy.exchanges)
        out["cold_start.first_request_s"] = calls[0].request_at - d.spawned_at
        out["cold_start.initialized_to_request_s"] = calls[0].request_at - init_at

        latencies = []
        for _ in range(sizes.warm_turns):
            proxy.reset()
            sent, _, _ = await turn(d, session, "hello again")
            latencies.append((messages_sent(proxy.exchanges)[0].request_at - sent) * 1000)
        out["warm.turn_start_to_request_ms"] = latencies

        await asyncio.sleep(0.2)
        before = d.memory()["VmRSS"]
        for _ in range(sizes.idle_sessions):
            s = await d.new_session(ws, "hello")
            await turn(d, s, "hello")
        await asyncio.sleep(0.5)
        mem = d.memory()
        out["idle_sessions.rss_mb"] = mem["VmRSS"] / MB
        out["idle_sessions.peak_rss_mb"] = mem["VmHWM"] / MB
        out["idle_sessions.per_session_kb"] = (mem["VmRSS"] - before) / 1024 / sizes.idle_sessions
    finally:
        if not sizes.fresh_daemons and rig.shared is None:
            rig.shared = d
        await rig.release(d)
    return out


# -- one turn of a scenario in a fresh daemon -------------------------------------------------

async def scenario(rig: Rig, key: str, spec: dict[str, Any], tool_ids: list[list[str]],
                   record: bool = False) -> tuple[dict[str, Any], Daemon, dict[str, Any],
                                                  list[Exchange]]:
    ws = rig.workspace()
    rig.model.add(key, spec)
    d = await rig.warm_daemon(ws)
    try:
        session = await d.new_session(ws, key)
        rig.proxy.reset()
        rig.proxy.record = record
        spy = await rig.start_profiler(d, "turn")
        cpu = d.cpu()
        sent, at, result = await turn(d, session, f"run the {key} scenario")
        cpu = d.cpu() - cpu
        await rig.stop_profiler(spy)
        rig.proxy.record = False
        await asyncio.sleep(0.05)
        mem = d.memory()
    finally:
        await rig.release(d)
    calls = messages_sent(rig.proxy.exchanges)
    events = d.turn_events(result["turnId"])
    model_s = sum(e.server_s or 0 for e in calls)
    out: dict[str, Any] = {
        f"{key}.wall_ms": (at - sent) * 1000,
        f"{key}.daemon_ms": (at - sent - model_s) * 1000,
        f"{key}.daemon_cpu_ms": cpu * 1000,
        f"{key}.first_request_ms": (calls[0].request_at - sent) * 1000,
        f"{key}.notifications": len(events),
        f"{key}.peak_rss_mb": mem.get("VmHWM", 0) / MB,
    }
    gaps = tool_gaps(calls, events, tool_ids)
    if tool_ids and any(tool_ids):
        out[f"{key}.tool_result_to_request_ms"] = gaps
        out[f"{key}.answer_to_request_ms"] = [(b.request_at - a.end_at) * 1000
                                              for a, b in zip(calls, calls[1:]) if a.end_at]
    checks = {f"{key}: completed": result["reason"] == "completed",
              f"{key}: seq contiguous": seq_ok(d, result["turnId"]),
              f"{key}: {len(tool_ids) or 1} model calls": len(calls) == max(1, len(tool_ids))}
    return out, d, {"checks": checks, "result": result}, calls


async def text_answer(rig: Rig) -> tuple[dict[str, Any], dict[str, bool]]:
    out, _, info, _ = await scenario(rig, "text", sc.single_text(rig.sizes), [])
    return out, info["checks"]


async def parallel(rig: Rig) -> tuple[dict[str, Any], dict[str, bool]]:
    spec, ids = sc.parallel_tools(rig.sizes)
    out, _, info, _ = await scenario(rig, "parallel", spec, ids)
    return out, info["checks"]


async def sequential(rig: Rig) -> tuple[dict[str, Any], dict[str, bool]]:
    spec, ids = sc.sequential_reads(rig.sizes)
    out, _, info, _ = await scenario(rig, "sequential", spec, ids)
    gaps = out["sequential.tool_result_to_request_ms"]
    if gaps:
        k = max(1, len(gaps) // 5)
        out["sequential.gap_first_fifth_ms"] = statistics.median(gaps[:k])
        out["sequential.gap_last_fifth_ms"] = statistics.median(gaps[-k:])
    return out, info["checks"]


def text_latency(prefix: str, calls: list[Exchange], events) -> tuple[dict[str, Any], bool]:
    """How long text took from reaching the daemon to reaching the editor.

    The proxy dates every text delta of every model call as it was handed to the daemon; the
    client dates every textDelta notification. A character's latency is the arrival of the
    first notification that contains it, minus its own arrival at the daemon. `passthrough`
    takes only the newest character of each notification: the daemon's own path, with no time
    spent waiting to be merged. `merge_wait` is what merging added: a character's latency minus
    that of the newest character sent with it (meaningful when the daemon keeps up).
    """
    arrivals: list[tuple[float, int]] = []
    base = 0
    for ex in calls:
        got = text_arrivals(ex)
        arrivals += [(t, base + n) for t, n in got]
        base += got[-1][1] if got else 0
    deltas = [e for e in events if e.kind == "textDelta"]
    received, total = [], 0
    for e in deltas:
        total += len(e.params["event"]["text"])
        received.append(total)
    out: dict[str, Any] = {f"{prefix}.model_deltas": len(arrivals),
                           f"{prefix}.text_notifications": len(deltas),
                           f"{prefix}.notification_reduction_x": len(arrivals) / max(1, len(deltas))}
    latencies, newest, owner = [], {}, []
    for t, n in arrivals:
        j = bisect.bisect_left(received, n)
        if j < len(deltas):
            latencies.append((deltas[j].at - t) * 1000)
            owner.append(j)
            newest[j] = latencies[-1]
    waits = sorted(lat - newest[j] for lat, j in zip(latencies, owner))
    if waits:
        out[f"{prefix}.merge_wait_p50_ms"] = waits[len(waits) // 2]
        out[f"{prefix}.merge_wait_max_ms"] = waits[-1]
    latencies.sort()
    if latencies:
        out[f"{prefix}.text_latency_p50_ms"] = latencies[len(latencies) // 2]
        out[f"{prefix}.text_latency_p99_ms"] = latencies[min(len(latencies) - 1,
                                                            int(len(latencies) * 0.99))]
        out[f"{prefix}.text_latency_max_ms"] = latencies[-1]
        out[f"{prefix}.passthrough_p50_ms"] = statistics.median(newest.values())
    return out, total == base


async def stream(rig: Rig) -> tuple[dict[str, Any], dict[str, bool]]:
    """The big answer at the model server's full speed: wall over its own time, notifications."""
    sizes = rig.sizes
    spec = sc.stream(sizes.stream_chars, sizes.stream_deltas)
    out, d, info, calls = await scenario(rig, "stream", spec, [], record=True)
    checks = {k: v for k, v in info["checks"].items() if "model calls" not in k}
    events = d.turn_events(info["result"]["turnId"])
    server_s = sum(e.server_s or 0 for e in calls)
    out["stream.server_ms"] = server_s * 1000
    out["stream.overhead_ms"] = out["stream.wall_ms"] - server_s * 1000
    out["stream.model_calls"] = len(calls)
    latency, complete = text_latency("stream", calls, events)
    out.update(latency)
    checks["stream: every character arrived"] = complete
    total = sum(len(e.params["event"]["text"]) for e in events if e.kind == "textDelta")
    out["stream.throughput_mb_s"] = total / MB / (out["stream.wall_ms"] / 1000)
    return out, checks


async def paced(rig: Rig) -> tuple[dict[str, Any], dict[str, bool]]:
    """Tiny deltas at the pace of a fast real model: what merging adds to text latency."""
    sizes = rig.sizes
    spec = sc.paced(sizes.paced_deltas, sizes.paced_interval_ms)
    out, d, info, calls = await scenario(rig, "paced", spec, [], record=True)
    events = d.turn_events(info["result"]["turnId"])
    latency, complete = text_latency("paced", calls, events)
    out.update(latency)
    checks = dict(info["checks"])
    checks["paced: every character arrived"] = complete
    return out, checks


# -- a client that stops reading, then reads slowly -------------------------------------------

async def slow_client(rig: Rig) -> tuple[dict[str, Any], dict[str, bool]]:
    """The editor stops reading. Session A's turn would write `flood_chars` of text in tiny
    deltas over many model calls (a tool call after each) at the model server's full speed, then
    a last answer that streams slowly; it pauses once the editor is behind, and other sessions
    start turns meanwhile. Then the editor reads again, at `slow_rate` bytes per second."""
    sizes, proxy = rig.sizes, rig.proxy
    ws = rig.workspace()
    spec = sc.flood(sizes.flood_chars, sizes.flood_deltas, tail_s=1.5)
    calls_a = len(spec["steps"])
    rig.model.add("flood", spec)
    rig.model.add("quick", sc.HELLO)
    d = await rig.warm_daemon(ws)
    out: dict[str, Any] = {"slow_client.text_mb": sizes.flood_chars / MB}
    checks: dict[str, bool] = {}
    peak = [0]
    sampling = True

    async def sample() -> None:
        while sampling:
            peak[0] = max(peak[0], d.memory().get("VmRSS", 0))
            await asyncio.sleep(0.01)

    async def until(predicate, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError("slow_client: the daemon did not get there in time")
            await asyncio.sleep(0.002)

    try:
        a = await d.new_session(ws, "flood")
        probes = [await d.new_session(ws, "quick") for _ in range(2 * sizes.stall_probes)]

        async def probe(session: str) -> tuple[float, asyncio.Future]:
            """turn/start in another session → its model request (ms); the answer may wait."""
            n = len(rig.model.requests("quick"))
            sent, done = d.start_turn(session, "a short question")
            await until(lambda: len(rig.model.requests("quick")) > n, 30)
            at = rig.model.requests("quick")[n]["at"]
            call = max((e for e in messages_sent(proxy.exchanges) if e.request_at <= at),
                       key=lambda e: e.request_at)
            return (call.request_at - sent) * 1000, done

        # The same kind of turn (the first of a session) with nothing stalled, to compare.
        unstalled = []
        for session in probes[:sizes.stall_probes]:
            ms, done = await probe(session)
            await asyncio.wait_for(done, 30)
            unstalled.append(ms)
        out["slow_client.unstalled_request_ms"] = unstalled
        await asyncio.sleep(0.2)
        before = d.memory()["VmRSS"]
        sampler = asyncio.ensure_future(sample())
        proxy.reset()
        floods = len(rig.model.requests("flood"))
        d.pause_reading()
        _, a_done = d.start_turn(a, "write a lot")
        # The daemon goes on until what it owes the editor reaches the transport's high-water
        # mark, then A's turn waits: no new model call for a second (or all of them made).
        seen, quiet_since = -1, time.monotonic()
        while time.monotonic() - quiet_since < 1.0:
            made = len(rig.model.requests("flood")) - floods
            if made != seen:
                seen, quiet_since = made, time.monotonic()
            if made >= calls_a:
                break
            await asyncio.sleep(0.01)
        out["slow_client.model_calls_while_stalled"] = seen
        out["slow_client.stalled_growth_mb"] = (peak[0] - before) / MB
        stalled, b_done = [], []
        for session in probes[sizes.stall_probes:]:
            ms, done = await probe(session)
            stalled.append(ms)
            b_done.append(done)
            await asyncio.sleep(0.03)
        out["slow_client.other_session_request_ms"] = stalled
        out["slow_client.stall_penalty_ms"] = (statistics.median(stalled)
                                               - statistics.median(unstalled))
        await asyncio.sleep(0.2)  # the other turns end; their answers wait for the editor too
        resumed, read_before = time.monotonic(), d.bytes_read
        d.resume_reading(sizes.slow_rate)
        results = [await asyncio.wait_for(done, 300) for done in b_done]
        b_at = max(at for _, at in results)
        out["slow_client.other_session_result_after_resume_ms"] = (b_at - resumed) * 1000
        out["slow_client.bytes_ahead_of_other_kb"] = (d.bytes_read - read_before) / 1024
        a_result, a_at = await asyncio.wait_for(a_done, 300)
        out["slow_client.drain_s"] = a_at - resumed
        sampling = False
        await sampler
        mem = d.memory()
        out["slow_client.peak_growth_mb"] = (max(peak[0], mem["VmHWM"]) - before) / MB
        out["slow_client.peak_rss_mb"] = mem["VmHWM"] / MB
        a_events = d.turn_events(a_result["turnId"])
        text = sum(len(e.params["event"]["text"]) for e in a_events if e.kind == "textDelta")
        checks["slow_client: every character arrived"] = text >= sizes.flood_chars
        checks["slow_client: seq contiguous"] = all(
            seq_ok(d, r["turnId"]) for r in [a_result] + [r for r, _ in results])
        out["slow_client.notifications"] = len(a_events)
    finally:
        sampling = False
        d.resume_reading()
        await rig.release(d)
    return out, checks
