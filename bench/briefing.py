"""The model's briefing: how big the first request of a session is, by section.

    .venv/bin/python -m bench.briefing [--json] [--source DIR]

One turn of the real daemon against the scripted model, in a sample workspace that is a git
repository with instruction files (an `AGENTS.md` at its root importing a style guide, a
`CLAUDE.md` in the workspace folder, an `AGENTS.md` below it, and the user's own file); the
request the scripted model received is split into the system prompt, the environment block,
the instruction files, the tool definitions and the prompt, in bytes (UTF-8, as JSON sends
them) and in estimated tokens (the scripted model's estimate). `--source DIR` runs the daemon
from another checkout's `server` and `protocol` folders (an earlier version, for a before and
after: `git archive <commit> | tar -x -C DIR`), with this checkout's Python packages.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.daemon import Daemon, daemon_env
from heddle.scripted import ScriptedServer

PROMPT = "Add a --verbose flag to the command line and a test for it."
SECTIONS = ("system", "environment", "instructions", "tools", "prompt")


def make_project(root: Path) -> tuple[Path, Path]:
    """(the workspace, the user's config folder): a small git repository with instruction files."""
    repo, config = root / "repo", root / "config"
    ws = repo / "tool"
    (ws / "cli").mkdir(parents=True)
    (repo / "docs").mkdir()
    (config / "heddle").mkdir(parents=True)

    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=Bench", "-c", "user.email=bench@example.com",
                        *args], cwd=repo, check=True, capture_output=True, timeout=60)
    git("init", "-q", "-b", "main")
    (repo / "AGENTS.md").write_text(
        "# Working on this repository\n\n- Run `make check` before you say a change is done.\n"
        "- Python 3.11, type hints everywhere, no new dependencies without asking.\n"
        "- Commit messages say what the product now does.\n\nStyle: @docs/style.md\n")
    (repo / "docs" / "style.md").write_text(
        "# Style\n\n- Four spaces; lines up to 100 characters.\n- One module per area, around "
        "300 lines.\n- Docstrings say what a thing is for; comments say why.\n" * 3)
    (ws / "CLAUDE.md").write_text("# The tool\n\nThe command line lives in cli/; its tests in "
                                  "tests/test_cli.py. Keep the output stable: scripts parse it.\n")
    (ws / "cli" / "AGENTS.md").write_text("Every flag has a test and a line in --help.\n")
    (ws / "cli" / "main.py").write_text("import argparse\n\n\ndef main():\n"
                                        "    parser = argparse.ArgumentParser()\n"
                                        "    return parser.parse_args()\n")
    (config / "heddle" / "AGENTS.md").write_text("Answer briefly; I read diffs, not prose.\n")
    git("add", ".")
    git("commit", "-q", "-m", "The tool's first command line")
    (ws / "cli" / "main.py").write_text((ws / "cli" / "main.py").read_text() + "# todo\n")
    return ws, config


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode()) if not isinstance(value, str) \
        else len(value.encode())


def sections(body: dict[str, Any]) -> dict[str, int]:
    """Bytes of each section of a Messages API request body (its first user message)."""
    system = body.get("system") or ""
    out = dict.fromkeys(SECTIONS, 0)
    out["system"] = _size(system if isinstance(system, str) else "".join(
        b.get("text", "") for b in system))
    out["tools"] = _size(body.get("tools") or [])
    first = body["messages"][0]["content"]
    for block in [{"type": "text", "text": first}] if isinstance(first, str) else first:
        text = block.get("text", "")
        kind = ("environment" if text.startswith("<environment>") else
                "instructions" if text.startswith("<instructions>") else "prompt")
        out[kind] += _size(text)
    out["request"] = _size(body)
    return out


async def measure(source: Path | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="heddle-bench-briefing-") as tmp:
        root = Path(tmp)
        ws, config = make_project(root)
        state = root / "state"
        state.mkdir()
        server = ScriptedServer({"brief": {"steps": [
            {"content": [{"type": "text", "text": "Done."}]}]}})
        with server.run_in_thread() as srv:
            env = daemon_env(srv.url, state, {"XDG_CONFIG_HOME": str(config)})
            command = [sys.executable, "-I", "-m", "heddle", "serve"]
            if source is not None:
                paths = [str(source / "server"), str(source / "protocol")]
                command = [sys.executable, "-I", "-c", f"import sys, runpy; sys.path[:0] = "
                           f"{paths!r}; runpy.run_module('heddle', run_name='__main__')",
                           "serve"]
            proc = await asyncio.create_subprocess_exec(
                *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL, env=env, cwd=str(ws), limit=1 << 16)
            d = Daemon(proc, time.monotonic())
            try:
                await d.initialize()
                opened = await d.request("session/new", {"workspace": str(ws), "model": "brief"})
                _, done = d.send_request("turn/start", {"sessionId": opened["sessionId"],
                                                        "prompt": PROMPT})
                await asyncio.wait_for(done, 120)
            finally:
                await d.shutdown()
            (request,) = srv.requests_for("brief")
        sizes = sections(request.body)
        return {"bytes": sizes, "instruction_files": [
            Path(f["path"]).relative_to(root).as_posix() for f in opened.get("instructions", [])],
            "gathering_ms": await _gathering_ms(ws)}


async def _gathering_ms(ws: Path) -> float:
    """Milliseconds this checkout takes to gather the sample's environment (git included),
    median of 5; its bound is `heddle.briefing.gather.BOUND`."""
    from datetime import date

    from heddle.briefing.environment import environment
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        await environment(ws, "brief", None, date.today())
        times.append((time.perf_counter() - t0) * 1000)
    return round(sorted(times)[2], 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.briefing", description=__doc__.split(
        "\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--source", type=Path, help="run the daemon from this checkout")
    args = parser.parse_args(argv)
    out = asyncio.run(measure(args.source.resolve() if args.source else None))
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    sizes = out["bytes"]
    print("the first request of a session, by section (bytes):")
    for name in (*SECTIONS, "request"):
        label = "whole request (JSON)" if name == "request" else name
        print(f"  {label:<22} {sizes[name]:>8,}")
    print(f"instruction files in force: {', '.join(out['instruction_files']) or 'none listed'}")
    print(f"gathering the environment (this checkout, median of 5): {out['gathering_ms']} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
