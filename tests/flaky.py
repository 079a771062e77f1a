"""`./dev flaky`: run chosen tests many times with the CPU kept busy, and report every failure.

    ./dev flaky [--runs N] [--hogs K] [--stop] TEST [TEST ...] [-- PYTEST ARGS]

Each run is a fresh pytest process over the tests named (files, node ids, `-k` expressions go
after `--`). Meanwhile K busy loops (default: one per core) keep every core loaded, as a busy
CI machine would. A failed run's output is kept in a log file whose path is printed; the last
line says how many runs failed. Exit 0 when none did.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN_TIMEOUT = 900
"""Seconds one pytest run may take before it counts as hung (each test has its own 60 s)."""


SPIN = "import os\nparent = os.getppid()\nwhile os.getppid() == parent: pass\n"
"""Spins until killed, or until the runner that started it is gone, however it ended."""


def hogs(count: int) -> list[subprocess.Popen]:
    """`count` processes that spin until killed or orphaned."""
    return [subprocess.Popen([sys.executable, "-c", SPIN], stdin=subprocess.DEVNULL)
            for _ in range(count)]


def _exit(signum: int, _frame) -> None:
    raise SystemExit(128 + signum)  # so the busy loops are killed on the way out


def last_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    return lines[-1].strip("= ") if lines else "(no output)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="./dev flaky", description=__doc__.split("\n\n")[0])
    parser.add_argument("tests", nargs="+", help="test files or node ids")
    parser.add_argument("--runs", type=int, default=20, help="runs (default 20)")
    parser.add_argument("--hogs", type=int, default=os.cpu_count() or 2,
                        help="busy loops beside the tests (default: one per core; 0: none)")
    parser.add_argument("--stop", action="store_true", help="stop at the first failed run")
    argv = sys.argv[1:] if argv is None else argv
    extra: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1:]
    args = parser.parse_args(argv)
    if args.runs < 1 or args.hogs < 0:
        parser.error("--runs must be at least 1 and --hogs at least 0")

    logs = Path(tempfile.mkdtemp(prefix="heddle-flaky-"))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args.tests, *extra]
    print(f"flaky: {args.runs} runs of {' '.join(args.tests)} with {args.hogs} busy "
          f"loop{'' if args.hogs == 1 else 's'}; "
          f"failed runs' output in {logs}", flush=True)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _exit)
    busy = hogs(args.hogs)
    failed: list[int] = []
    try:
        for run in range(1, args.runs + 1):
            start = time.monotonic()
            try:
                done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True,
                                      timeout=RUN_TIMEOUT)
                code, output, said = done.returncode, done.stdout + done.stderr, done.stdout
            except subprocess.TimeoutExpired as exc:
                code, said = -1, f"hung past {RUN_TIMEOUT} s"
                output = f"{exc.stdout or ''}{exc.stderr or ''}\nflaky: {said}"
            took = time.monotonic() - start
            if code == 0:
                print(f"run {run}/{args.runs}: passed in {took:.1f} s ({last_line(said)})",
                      flush=True)
                continue
            failed.append(run)
            log = logs / f"run-{run}.log"
            log.write_text(output)
            print(f"run {run}/{args.runs}: FAILED in {took:.1f} s ({last_line(said)}): {log}",
                  flush=True)
            if args.stop:
                break
    finally:
        for hog in busy:
            hog.kill()
            hog.wait()
    ran = run
    print(f"flaky: {len(failed)} of {ran} runs failed" + (f" (runs {', '.join(map(str, failed))})"
                                                         if failed else ""), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
