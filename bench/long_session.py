"""A long session: does an iteration cost more at 300 than at 10? And what does memory do?

    .venv/bin/python -m bench.long_session [--iterations 305] [--window 60000]

One turn of N tool rounds (each reads a 10 KB file) against the scripted model, with the
context window small enough that the context pipeline works the whole time (microcompact,
snip). An iteration's time is the gap between consecutive `modelCall` events as the client
receives them. Prints a JSON document and a markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
from pathlib import Path

from bench.daemon import Daemon, daemon_env, without_repeat_guard
from heddle.scripted import ScriptedServer


async def run(iterations: int, window: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="heddle-bench-long-") as tmp:
        root = Path(tmp)
        workspace = root / "ws"
        workspace.mkdir()
        (workspace / "big.txt").write_text("".join(f"line {i}: " + "data " * 14 + "\n"
                                                   for i in range(120)))
        server = ScriptedServer({"long": {"contextWindow": window, "repeat": True, "steps": [
            {"content": [{"type": "tool_use", "name": "Read", "input": {"path": "big.txt"}}]}]}})
        with server.run_in_thread() as srv:
            env = daemon_env(srv.url, root / "state", {"HEDDLE_CONTEXT_WINDOW": str(window),
                                                       **without_repeat_guard(root)})
            daemon = await Daemon.spawn(env, workspace, root / "stderr.log")
            try:
                await daemon.initialize()
                session = await daemon.new_session(workspace, "long")
                _, done = daemon.send_request("turn/start", {
                    "sessionId": session, "prompt": "read big.txt again and again",
                    "maxTurns": iterations})
                result, _ = await asyncio.wait_for(done, 600)
                peak = daemon.memory().get("VmHWM", 0)
                calls = [e.at for e in daemon.events if e.kind == "modelCall"]
                layers: dict[str, int] = {}
                for e in daemon.events:
                    if e.kind == "compaction":
                        layer = e.params["event"]["layer"]
                        layers[layer] = layers.get(layer, 0) + 1
            finally:
                await daemon.shutdown()
            statuses = [r.status for r in srv.requests_for("long")]
    gaps = [(b - a) * 1000 for a, b in zip(calls, calls[1:])]

    def window_of(center: int) -> list[float]:
        return gaps[max(0, center - 5):center + 5]

    points = {f"iteration_ms_at_{n}": window_of(n) for n in (10, 100, 200)}
    points["iteration_ms_at_end"] = window_of(len(gaps) - 6)
    return {
        "iterations": len(calls), "reason": result["reason"],
        "rejected_requests": sum(1 for s in statuses if s != 200),
        **{k: {"median": statistics.median(v), "min": min(v), "max": max(v)}
           for k, v in points.items()},
        "peak_rss_mb": round(peak / 2**20, 1), "compactions": layers,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iterations", type=int, default=305)
    p.add_argument("--window", type=int, default=60_000)
    args = p.parse_args()
    out = asyncio.run(run(args.iterations, args.window))
    print(json.dumps(out, indent=2))
    print("\n| metric | median | min | max |\n| --- | ---: | ---: | ---: |")
    for key in ("iteration_ms_at_10", "iteration_ms_at_100", "iteration_ms_at_200",
                "iteration_ms_at_end"):
        v = out[key]
        print(f"| {key} | {v['median']:.1f} | {v['min']:.1f} | {v['max']:.1f} |")
    print(f"\n{out['iterations']} iterations, {out['rejected_requests']} rejected requests, "
          f"peak RSS {out['peak_rss_mb']} MB, compactions {out['compactions']}")


if __name__ == "__main__":
    main()
