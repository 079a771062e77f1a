"""Prompt caching: how much of each session's input the cache serves, and what it costs.

    .venv/bin/python -m bench.cache [--iterations 300] [--quick]

Three sessions of the real daemon against the scripted model, whose cache accounting follows
the Messages API's rules (docs/scripted-model.md): the 30-read scenario of the suite, a turn of
300 tool rounds (10 KB reads, the default 200K window, so that microcompact and snip run; once
with client-side clearing and once with the endpoint's context editing), and a two-turn
session. For each: the share of input tokens read from the cache over the calls after the
first, the calls after the first that read nothing, the calls that re-wrote the whole
conversation (read no more than tools + system), the calls that did not read all of the call
before them, and the input cost relative to no caching (reads at 0.1x, writes at 1.25x).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from bench import scenarios as sc
from bench.daemon import Daemon, daemon_env, without_repeat_guard
from heddle.scripted import ScriptedServer
from heddle.scripted.context_edits import apply_edits
from heddle.scripted.prompt import build_prompt

READ_COST, WRITE_COST = 0.1, 1.25


def _through_last_block(body: dict[str, Any]) -> int:
    if "context_management" in body:
        body, _ = apply_edits(body)
    prompt = build_prompt(body)
    return prompt.tokens_at(len(prompt.blocks) - 1)


def _stable(body: dict[str, Any]) -> int:
    prompt = build_prompt({"tools": body.get("tools"), "system": body.get("system"),
                           "messages": []})
    return prompt.tokens_at(len(prompt.blocks) - 1) if prompt.blocks else 0


def account(requests) -> dict[str, Any]:
    """The cache figures of one session's model requests (all answered)."""
    caches = [r.cache for r in requests]
    total = [c.read_tokens + c.creation_tokens + c.input_tokens for c in caches]
    later = range(1, len(caches))
    cost = sum(c.read_tokens * READ_COST + c.creation_tokens * WRITE_COST + c.input_tokens
               for c in caches)
    return {
        "calls": len(caches),
        "input_tokens": sum(total),
        "read_share_after_first": (sum(caches[k].read_tokens for k in later)
                                   / max(1, sum(total[k] for k in later))),
        "calls_without_read": sum(1 for k in later if caches[k].read_tokens == 0),
        "full_rewrites": sum(1 for k in later
                             if caches[k].read_tokens <= _stable(requests[k].body)),
        "partial_rewrites": sum(1 for k in later if caches[k].read_tokens
                                < _through_last_block(requests[k - 1].body)),
        "cost_vs_uncached": cost / max(1, sum(total)),
    }


async def _session(srv: ScriptedServer, root: Path, workspace: Path, name: str,
                   turns: list[tuple[str, int]], extra: dict[str, str] | None = None
                   ) -> dict[str, Any]:
    state = root / f"state-{name}"
    state.mkdir()
    # the long sessions read the same file again and again on purpose
    env = daemon_env(srv.url, state, {**(extra or {}), **without_repeat_guard(state)})
    d = await Daemon.spawn(env, workspace, state / "stderr.log")
    layers: dict[str, int] = {}
    try:
        await d.initialize()
        session = await d.new_session(workspace, name)
        for prompt, max_turns in turns:
            _, done = d.send_request("turn/start", {"sessionId": session, "prompt": prompt,
                                                    "maxTurns": max_turns})
            await asyncio.wait_for(done, 900)
        for e in d.events:
            if e.kind == "compaction":
                layer = e.params["event"]["layer"]
                layers[layer] = layers.get(layer, 0) + 1
    finally:
        await d.shutdown()
    requests = srv.requests_for(name)
    out = account([r for r in requests if r.cache is not None])
    out["rejected"] = sum(1 for r in requests if r.status != 200)
    out["compactions"] = layers
    return out


async def run(iterations: int = 300, reads: int = 30) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="heddle-bench-cache-") as tmp:
        root = Path(tmp)
        workspace = sc.make_workspace(root / "ws", 30)
        (workspace / "big.txt").write_text("".join(f"line {i}: " + "data " * 14 + "\n"
                                                   for i in range(120)))
        spec, _ = sc.sequential_reads(sc.Sizes(sequential_reads=reads))
        long = {"repeat": True, "steps": [{"content": [
            {"type": "tool_use", "name": "Read", "input": {"path": "big.txt"}}]}]}
        half, _ = sc.sequential_reads(sc.Sizes(sequential_reads=reads // 2))
        for step in half["steps"]:  # ids must be unique across the session's two turns
            for block in step["content"]:
                block.pop("id", None)
        server = ScriptedServer({"reads": spec, "long": long, "long-edits": long,
                                 "two": {"steps": half["steps"] * 2}})
        out: dict[str, Any] = {}
        with server.run_in_thread() as srv:
            out["sequential"] = await _session(srv, root, workspace, "reads",
                                               [("read the modules", 100)])
            out["long_session"] = await _session(srv, root, workspace, "long",
                                                 [("read big.txt again and again", iterations)])
            out["long_session_context_editing"] = await _session(
                srv, root, workspace, "long-edits", [("read big.txt again and again",
                                                      iterations)],
                {"HEDDLE_CONTEXT_EDITING": "1"})
            out["two_turns"] = await _session(srv, root, workspace, "two",
                                              [("read the modules", 100),
                                               ("read them again", 100)])
    return out


SESSIONS = ("sequential", "long_session", "long_session_context_editing", "two_turns")
FIGURES = {
    "read_share_pct": ("share of input tokens read from the cache, calls after the first",
                       (">=", 90)),
    "calls_without_read": ("calls after the first that read nothing from the cache",
                           ("<=", 0)),
    "full_rewrites": ("calls after the first that re-wrote the whole conversation (read only "
                      "tools + system)", None),
    "cost_x": ("input cost relative to no caching (reads 0.1x, writes 1.25x)", None),
}
METRICS = {f"cache.{s}.{f}": (f"{what} ({s})", target) for s in SESSIONS
           for f, (what, target) in FIGURES.items()}


async def group(rig) -> dict[str, Any]:
    """The suite's `cache` group (`python -m bench`): the same sessions, flat metrics. Token
    counts do not vary between repetitions, so the sessions run once per suite run."""
    doc = getattr(rig, "cache_doc", None)
    if doc is None:
        doc = rig.cache_doc = await run(rig.sizes.cache_iterations, rig.sizes.sequential_reads)
    out: dict[str, Any] = {}
    for name, m in doc.items():
        out[f"cache.{name}.read_share_pct"] = m["read_share_after_first"] * 100
        out[f"cache.{name}.calls_without_read"] = m["calls_without_read"]
        out[f"cache.{name}.full_rewrites"] = m["full_rewrites"]
        out[f"cache.{name}.cost_x"] = m["cost_vs_uncached"]
    checks = {f"cache: {name} answered every request": m["rejected"] == 0
              for name, m in doc.items()}
    return out, checks


def markdown(doc: dict[str, Any]) -> str:
    lines = ["| session | calls | read from cache (after the 1st) | calls without a read "
             "| whole-prefix re-writes | calls not reading all of the previous | input cost "
             "vs no cache |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, m in doc.items():
        lines.append(f"| {name} | {m['calls']} | {m['read_share_after_first']:.1%} | "
                     f"{m['calls_without_read']} | {m['full_rewrites']} | "
                     f"{m['partial_rewrites']} | {m['cost_vs_uncached']:.3f}x |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iterations", type=int, default=300)
    p.add_argument("--quick", action="store_true", help="the suite's quick sizes")
    args = p.parse_args()
    quick = sc.QUICK
    doc = asyncio.run(run(quick.cache_iterations, quick.sequential_reads) if args.quick
                      else run(args.iterations))
    print(json.dumps(doc, indent=2))
    print()
    print(markdown(doc))


if __name__ == "__main__":
    main()
