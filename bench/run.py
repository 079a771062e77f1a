"""Run the benchmark suite: `python -m bench` (or `python bench/run.py`).

Every repetition runs every group against a fresh daemon; the report gives each metric's
median with its min and max over all samples. The machine may be shared and noisy: compare
medians, and rerun with more repetitions when min and max are far apart.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python bench/run.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import acp  # noqa: E402
from bench import cache  # noqa: E402
from bench import scenarios as sc  # noqa: E402
from bench import suite  # noqa: E402

# name: (what it is, target as (op, value) or None)
METRICS: dict[str, tuple[str, tuple[str, float] | None]] = {
    "cold_start.initialize_s": ("spawn → initialize result", ("<=", 0.5)),
    "cold_start.initialize_cpu_s": ("…CPU time the daemon used until then (robust to load)", None),
    "cold_start.first_request_s": ("spawn → first model request (turn sent right after initialized)", None),
    "cold_start.initialized_to_request_s": ("initialize result → that first model request", None),
    "warm.turn_start_to_request_ms": ("turn/start → first model request, warm daemon", ("<=", 5)),
    "warm.tool_result_to_request_ms": ("the editor has the last toolCallFinished → next model request (parallel and sequential)", ("<=", 5)),
    "text.wall_ms": ("single text answer: turn/start → result", None),
    "text.daemon_ms": ("…minus the model server's own time", None),
    "text.daemon_cpu_ms": ("…CPU time the daemon used (10 ms ticks)", None),
    "text.peak_rss_mb": ("…peak RSS of the daemon", ("<=", 120)),
    "parallel.wall_ms": ("10 parallel reads + grep + edit + answer: turn/start → result", None),
    "parallel.daemon_ms": ("…minus the model server's own time", None),
    "parallel.daemon_cpu_ms": ("…CPU time the daemon used (10 ms ticks)", None),
    "parallel.tool_result_to_request_ms": ("…last tool result → next model request", ("<=", 5)),
    "parallel.answer_to_request_ms": ("…last byte of the model's answer → next model request (tools run in between)", None),
    "parallel.peak_rss_mb": ("…peak RSS of the daemon", ("<=", 120)),
    "sequential.wall_ms": ("30 sequential reads + answer: turn/start → result", None),
    "sequential.daemon_ms": ("…minus the model server's own time", None),
    "sequential.daemon_cpu_ms": ("…CPU time the daemon used (10 ms ticks)", None),
    "sequential.tool_result_to_request_ms": ("…tool result → next model request, every round", ("<=", 5)),
    "sequential.answer_to_request_ms": ("…last byte of the model's answer → next request (the Read runs in between)", None),
    "sequential.gap_first_fifth_ms": ("…median of that gap over the first fifth of rounds", None),
    "sequential.gap_last_fifth_ms": ("…and over the last fifth (growth with history)", None),
    "sequential.peak_rss_mb": ("…peak RSS of the daemon", ("<=", 120)),
    "stream.wall_ms": ("200 KB answer in 5,000 deltas: turn/start → result", None),
    "stream.server_ms": ("…the model server's own time (first request byte → last answer byte)", None),
    "stream.overhead_ms": ("…wall minus the server's own time", ("<=", 100)),
    "stream.daemon_cpu_ms": ("…CPU time the daemon used (10 ms ticks)", None),
    "stream.model_calls": ("…model calls (an answer cut at 8,192 tokens is asked again with more)", None),
    "stream.model_deltas": ("…text deltas the model sent", None),
    "stream.text_notifications": ("…textDelta notifications the editor got", None),
    "stream.notification_reduction_x": ("…model deltas per textDelta notification", (">=", 10)),
    "stream.text_latency_p50_ms": ("…text reaching the daemon → in the editor, median (backlog: the daemon parses slower than the server sends)", None),
    "stream.text_latency_max_ms": ("…worst character", None),
    "stream.throughput_mb_s": ("…text delivered per second of wall time", None),
    "stream.peak_rss_mb": ("…peak RSS of the daemon", ("<=", 120)),
    "paced.model_deltas": ("1,000 deltas of 8 characters, 2 ms apart (a fast real model)", None),
    "paced.text_notifications": ("…textDelta notifications the editor got", None),
    "paced.passthrough_p50_ms": ("…newest character of each notification: daemon → editor, median", None),
    "paced.text_latency_p50_ms": ("…every character: reaching the daemon → in the editor, median", None),
    "paced.text_latency_p99_ms": ("…99th percentile", None),
    "paced.text_latency_max_ms": ("…worst character", None),
    "paced.merge_wait_p50_ms": ("…time merging added: a character's latency minus that of the newest one sent with it, median", None),
    "paced.merge_wait_max_ms": ("…worst character", ("<=", 20)),
    "paced.peak_rss_mb": ("…peak RSS of the daemon", ("<=", 120)),
    "idle_sessions.rss_mb": ("RSS with 50 idle sessions (one turn each)", None),
    "idle_sessions.peak_rss_mb": ("…peak RSS", ("<=", 120)),
    "idle_sessions.per_session_kb": ("…RSS per idle session", None),
    "slow_client.text_mb": ("editor stops reading while session A writes this much text", None),
    "slow_client.model_calls_while_stalled": ("…A's model calls made before its turn paused for the editor", None),
    "slow_client.stalled_growth_mb": ("…daemon RSS growth while nothing is read", None),
    "slow_client.unstalled_request_ms": ("first turn of another session, nothing stalled: turn/start → model request", None),
    "slow_client.other_session_request_ms": ("…the same while the editor reads nothing and A waits for it", None),
    "slow_client.stall_penalty_ms": ("…the difference of the medians: what the stall costs other sessions' work", ("<=", 5)),
    "slow_client.other_session_result_after_resume_ms": ("editor reads again (slowly): the other sessions' results all arrived after", None),
    "slow_client.bytes_ahead_of_other_kb": ("…bytes the editor read before them (pipe and its own 128 KiB buffer included)", None),
    "slow_client.drain_s": ("…A's result arrives after", None),
    "slow_client.peak_growth_mb": ("…daemon peak RSS growth over the whole test", None),
    "slow_client.peak_rss_mb": ("…peak RSS of the daemon", ("<=", 120)),
    **cache.METRICS,
    **acp.METRICS,
}

GROUPS = {
    "lifecycle": suite.lifecycle,
    "text": suite.text_answer,
    "parallel": suite.parallel,
    "sequential": suite.sequential,
    "stream": suite.stream,
    "paced": suite.paced,
    "slow_client": suite.slow_client,
    "cache": cache.group,
    "acp": acp.group,
}

POOLED = {"warm.tool_result_to_request_ms": ("parallel.tool_result_to_request_ms",
                                             "sequential.tool_result_to_request_ms")}


def unit(name: str) -> str:
    for suffix, u in (("_mb_s", "MB/s"), ("_ms", "ms"), ("_s", "s"), ("_mb", "MB"),
                      ("_kb", "KB"), ("_x", "×"), ("_pct", "%")):
        if name.endswith(suffix):
            return u
    return ""


def summarize(samples: dict[str, list[float]]) -> dict[str, dict[str, Any]]:
    for pooled, parts in POOLED.items():
        samples[pooled] = [v for p in parts for v in samples.get(p, [])]
    out: dict[str, dict[str, Any]] = {}
    for name in list(METRICS) + sorted(set(samples) - set(METRICS)):
        values = samples.get(name)
        if not values:
            continue
        what, target = METRICS.get(name, ("", None))
        entry: dict[str, Any] = {"median": statistics.median(values), "min": min(values),
                                 "max": max(values), "n": len(values), "unit": unit(name),
                                 "what": what}
        if target:
            op, value = target
            entry["target"] = f"{op} {value:g}"
            entry["met"] = (entry["median"] <= value) if op == "<=" else (entry["median"] >= value)
        out[name] = entry
    return out


def fmt(v: float) -> str:
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}" if abs(v) >= 0.1 else f"{v:.3f}"


def markdown(doc: dict[str, Any]) -> str:
    lines = ["| metric | median | min | max | unit | target | met |",
             "| --- | ---: | ---: | ---: | --- | --- | --- |"]
    for name, m in doc["metrics"].items():
        met = {True: "yes", False: "**no**"}.get(m.get("met"), "")
        lines.append(f"| `{name}` | {fmt(m['median'])} | {fmt(m['min'])} | {fmt(m['max'])} "
                     f"| {m['unit']} | {m.get('target', '')} | {met} |")
    doors = [(what, doc["metrics"][lsp], doc["metrics"][a]) for what, lsp, a in acp.DOORS
             if lsp in doc["metrics"] and a in doc["metrics"]]
    if doors:  # the ACP door beside the LSP door
        lines += ["", "| both doors (median) | LSP door | ACP door |", "| --- | ---: | ---: |"]
        lines += [f"| {what} | {fmt(lsp['median'])} | {fmt(a['median'])} |"
                  for what, lsp, a in doors]
    failed = [k for k, ok in doc["checks"].items() if not ok]
    lines.append("")
    lines.append(f"checks: {len(doc['checks']) - len(failed)}/{len(doc['checks'])} passed"
                 + (f"; failed: {', '.join(failed)}" if failed else ""))
    return "\n".join(lines)


async def run(sizes: sc.Sizes, groups: list[str], profile: Path | None = None
              ) -> dict[str, Any]:
    samples: dict[str, list[float]] = {}
    checks: dict[str, bool] = {}
    started = time.monotonic()
    async with suite.Rig(sizes, profile) as rig:
        for rep in range(sizes.reps):
            for name in groups:
                suite.log(f"rep {rep + 1}/{sizes.reps}: {name}")
                rig.group = f"{name}-{rep + 1}"
                got = await GROUPS[name](rig)
                values, group_checks = got if isinstance(got, tuple) else (got, {})
                for k, ok in group_checks.items():
                    checks[k] = checks.get(k, True) and bool(ok)
                for k, v in values.items():
                    samples.setdefault(k, []).extend(v if isinstance(v, list) else [v])
    return {
        "suite": "heddle-bench",
        "version": 1,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "load_before": os.getloadavg(),
                    "python": platform.python_version(), "platform": platform.platform()},
        "config": {**sizes.as_dict(), "groups": groups},
        "duration_s": round(time.monotonic() - started, 1),
        "metrics": summarize(samples),
        "checks": checks,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    p.add_argument("-n", "--reps", type=int, help="repetitions (default 5; 1 with --quick)")
    p.add_argument("--quick", action="store_true",
                   help="one repetition with small sizes (a smoke run, not a measurement)")
    p.add_argument("--only", nargs="+", choices=list(GROUPS), help="run only these groups")
    p.add_argument("--json", metavar="PATH", help="write the JSON document here instead of stdout")
    p.add_argument("--profile", metavar="DIR", type=Path,
                   help="sample every daemon with py-spy (if installed) into DIR (collapsed "
                        "stacks); the numbers of a profiled run are not comparable")
    args = p.parse_args(argv)
    sizes = sc.QUICK if args.quick else sc.FULL
    if args.reps:
        sizes = sc.Sizes(**{**sizes.as_dict(), "reps": args.reps})
    doc = asyncio.run(run(sizes, args.only or list(GROUPS), args.profile))
    text = json.dumps(doc, indent=2)
    if args.json:
        Path(args.json).write_text(text + "\n")
    else:
        print(text)
        print()
    print(markdown(doc))
    return 0 if all(doc["checks"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
