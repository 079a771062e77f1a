"""`python -m heddle.scripted`: run the scripted model server until SIGTERM or SIGINT.

Prints exactly one line, `listening on http://HOST:PORT`, to stdout once ready; logs go to
stderr. A port it cannot listen on is one line on stderr and exit code 1. Scenarios come from --scenario files (named by file stem) and --scenario-dir
directories; the bundled scenarios are always available.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from pathlib import Path

from .scenario import BUNDLED_DIR, ScenarioError, load_scenario
from .server import ScriptedServer


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m heddle.scripted",
                                     description="Serve the Messages API from scenario files.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--scenario", action="append", default=[], metavar="FILE",
                        help="a scenario file (or bundled scenario name); repeatable")
    parser.add_argument("--scenario-dir", action="append", default=[], metavar="DIR",
                        help="add every *.json in DIR; repeatable")
    parser.add_argument("--quiet", action="store_true", help="log warnings only")
    return parser


async def _serve(server: ScriptedServer) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        print(f"listening on {server.url}", flush=True)
        await stop.wait()


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING if args.quiet else logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    server = ScriptedServer(host=args.host, port=args.port)
    try:
        server.load_dir(BUNDLED_DIR)
        for directory in args.scenario_dir:
            server.load_dir(directory)
        for file in args.scenario:
            server.add_scenario(Path(file).stem, load_scenario(file))
    except ScenarioError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(_serve(server))
    except OSError as exc:  # the port is taken, the host is not this machine's, ...
        reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
        print(f"error: cannot listen on {args.host}:{args.port}: {reason}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
