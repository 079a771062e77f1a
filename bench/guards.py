"""How often the repeat guard fires: `python -m bench.guards [--json FILE]`.

Every scripted scenario of the repository (the scripted server's own, the VS Code client's
end-to-end ones, and the benchmark suite's tool scenarios) and a few written to loop run as
one turn each, through the real daemon in the `default` mode, every permission request
answered "allow once" (the guard's question too, so a caught turn goes on, counting afresh).
Turns of scenarios that never end on their own stop at 40 model calls. Per scenario: the tool
calls, the results that carried the guard's warning (read from the requests the model got),
the calls it refused, and the `loopDetected` events (each one a question to the user).

The scenarios written to loop are the control: the same call made again and again, cycles of
two and three calls, and two that must not count (a call re-run after successful edits, a
command whose output differs every time). "Reads big.txt" is what the cache and long-session
benchmarks do on purpose (they turn the guard off).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from bench import scenarios as sc
from bench.daemon import Daemon, DaemonError, daemon_env
from heddle.scripted import ScriptedServer
from heddle.scripted.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
SCENARIO_DIRS = (ROOT / "server/heddle/scripted/scenarios", ROOT / "clients/vscode/test/scenarios")
MAX_TURNS = 40
TURN_TIMEOUT = 120.0
WARNING = "[Heddle] You have made"


def call(name: str, **inp: Any) -> dict[str, Any]:
    return {"content": [{"type": "tool_use", "name": name, "input": inp}]}


DONE = {"content": [{"type": "text", "text": "Done."}]}
GREP = call("Grep", pattern="no_such_text_anywhere")
READ = call("Read", path="app.py")
LS = call("LS", path="src")

LOOPS: dict[str, dict[str, Any]] = {
    "loop: the same call x6": {"steps": [GREP] * 6 + [DONE]},
    "loop: cycle of 2 x4": {"steps": [READ, GREP] * 4 + [DONE]},
    "loop: cycle of 3 x4": {"steps": [READ, GREP, LS] * 4 + [DONE]},
    "no loop: re-run after edits": {"steps": [
        step for n in range(4) for step in (GREP, GREP, call("Write", path=f"notes{n}.txt",
                                                              content=f"{n}\n"))] + [DONE]},
    "no loop: output differs": {"steps": [call("Bash", command="date +%s%N")] * 6 + [DONE]},
    "reads big.txt": {"repeat": True, "steps": [call("Read", path="big.txt")]},
}


def repository_scenarios() -> dict[str, dict[str, Any]]:
    """The scenario files (by file name) and the benchmark suite's tool scenarios."""
    found: dict[str, dict[str, Any]] = {}
    for folder in SCENARIO_DIRS:
        for path in sorted(folder.glob("*.json")):
            load_scenario(path)  # a file that does not load fails here, named
            found[path.stem] = json.loads(path.read_text())
    sizes = sc.QUICK
    found["bench: parallel tools"] = sc.parallel_tools(sizes)[0]
    found["bench: sequential reads"] = sc.sequential_reads(sc.FULL)[0]
    found["bench: flood"] = sc.flood(sizes.flood_chars, sizes.flood_deltas)
    return found


def warned(srv: ScriptedServer, model: str) -> int:
    """Tool results the model got with the guard's warning."""
    count = 0
    for request in srv.requests_for(model):
        messages = request.body.get("messages") or [] if isinstance(request.body, dict) else []
        last = messages[-1]["content"] if messages else []
        for block in last if isinstance(last, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                inner = block.get("content")
                text = inner if isinstance(inner, str) else json.dumps(inner)
                count += WARNING in text
    return count


async def one(daemon: Daemon, srv: ScriptedServer, workspace: Path, name: str, model: str
              ) -> dict[str, Any]:
    session = await daemon.new_session(workspace, model, mode="default")
    _, done = daemon.send_request("turn/start", {"sessionId": session, "prompt": "go",
                                                 "maxTurns": MAX_TURNS})
    try:
        result, _ = await asyncio.wait_for(done, TURN_TIMEOUT)
        reason = result["reason"]
    except (asyncio.TimeoutError, DaemonError) as exc:
        daemon.notify("turn/cancel", {"sessionId": session})
        reason = f"({type(exc).__name__})"
    events = [e.params["event"] for e in daemon.events
              if e.params.get("sessionId") == session]
    finished = [e for e in events if e["kind"] == "toolCallFinished"]
    return {"scenario": name, "reason": reason,
            "tool_calls": len(finished),
            "warned": warned(srv, model),
            "refused": sum(e["summary"].startswith("not run: repeated") for e in finished),
            "asked": sum(e["kind"] == "loopDetected" for e in events)}


async def run() -> list[dict[str, Any]]:
    everything = {**repository_scenarios(), **LOOPS}
    models = {name: f"guards-{n}" for n, name in enumerate(everything)}
    with tempfile.TemporaryDirectory(prefix="heddle-bench-guards-") as tmp:
        root = Path(tmp)
        workspace = sc.make_workspace(root / "ws", 30)
        (workspace / "hello.py").write_text('print("Hello, wrold")\n')
        (workspace / "big.txt").write_text("".join(f"line {i}: data\n" for i in range(200)))
        server = ScriptedServer({models[name]: spec for name, spec in everything.items()})
        with server.run_in_thread() as srv:
            daemon = await Daemon.spawn(daemon_env(srv.url, root / "state",
                                                   {"XDG_CONFIG_HOME": str(root / "config")}),
                                        workspace, root / "stderr.log")
            try:
                await daemon.initialize()
                return [await one(daemon, srv, workspace, name, models[name])
                        for name in everything]
            finally:
                await daemon.shutdown()


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| scenario | ended | tool calls | warned | refused | asked |",
             "| --- | --- | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['scenario']} | {r['reason']} | {r['tool_calls']} | {r['warned']} | "
                     f"{r['refused']} | {r['asked']} |")
    plain = [r for r in rows if not r["scenario"].startswith(("loop:", "no loop:", "reads big"))]
    fired = [r["scenario"] for r in plain if r["warned"] or r["refused"]]
    lines.append("")
    warnings, refusals = sum(r["warned"] for r in plain), sum(r["refused"] for r in plain)
    lines.append(f"{len(plain)} repository scenarios, {sum(r['tool_calls'] for r in plain)} tool "
                 f"calls: the guard warned {warnings} time{'' if warnings == 1 else 's'} and "
                 f"refused {refusals} call{'' if refusals == 1 else 's'}"
                 + (f" (in {', '.join(fired)})" if fired else ""))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.guards", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    rows = asyncio.run(run())
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps({"suite": "heddle-bench-guards", "rows": rows},
                                        indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
