"""What a command that floods its output costs the daemon.

    .venv/bin/python -m bench.output_flood [--mb 50] [--reps 3]

One turn whose Bash call writes `--mb` megabytes to stdout (`head -c ... /dev/zero | tr`),
against the scripted model. Measured: the daemon's CPU seconds for the turn (user + system,
all its threads, from /proc; the command's own processes are not the daemon's), the wall time
of the turn, and what reached the client (events, bytes). Prints a JSON document.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from bench.daemon import Daemon, daemon_env
from heddle.scripted import ScriptedServer


async def run(mb: int, reps: int) -> dict:
    command = f"head -c {mb * 1_000_000} /dev/zero | tr '\\0' a; echo; echo end of flood"
    with tempfile.TemporaryDirectory(prefix="heddle-bench-flood-") as tmp:
        root = Path(tmp)
        workspace = root / "ws"
        workspace.mkdir()
        server = ScriptedServer({"flood": {"repeat": True, "steps": [
            {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": command}}]},
            {"content": [{"type": "text", "text": "Done."}]}]}})
        with server.run_in_thread() as srv:
            daemon = await Daemon.spawn(daemon_env(srv.url, root / "state"), workspace,
                                        root / "stderr.log")
            runs = []
            try:
                await daemon.initialize()
                for rep in range(reps + 1):  # the first warms up (imports, first connection)
                    session = await daemon.new_session(workspace, "flood")
                    events_before, bytes_before = len(daemon.events), daemon.bytes_read
                    cpu, started = daemon.cpu(), time.monotonic()
                    _, done = daemon.start_turn(session, "flood")
                    result, _ = await asyncio.wait_for(done, 600)
                    if rep == 0:
                        continue
                    runs.append({
                        "reason": result["reason"],
                        "daemon_cpu_s": round(daemon.cpu() - cpu, 3),
                        "wall_s": round(time.monotonic() - started, 3),
                        "events": len(daemon.events) - events_before,
                        "client_bytes": daemon.bytes_read - bytes_before})
            finally:
                await daemon.shutdown()
    return {"mb": mb, "runs": runs,
            "median_daemon_cpu_s": statistics.median(r["daemon_cpu_s"] for r in runs),
            "median_wall_s": statistics.median(r["wall_s"] for r in runs)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=int, default=50)
    p.add_argument("--reps", type=int, default=3)
    args = p.parse_args()
    print(json.dumps(asyncio.run(run(args.mb, args.reps)), indent=2))


if __name__ == "__main__":
    main()
