"""`heddle ask`: a terminal client. Spawns the daemon, runs one turn, streams it to the terminal."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any, TextIO

from heddle import secret_env
from heddle.client import Connection, RpcError
from heddle.launch import python_command

EXIT_CODES = {"completed": 0, "cancelled": 130}
SHUTDOWN_TIMEOUT = 5.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("prompt", nargs="+", help="what to ask")
    p.add_argument("-w", "--workspace", default=".", help="workspace folder (default: the current one)")
    p.add_argument("-m", "--model", help="model id (default: HEDDLE_MODEL or the daemon's default)")
    p.add_argument("--mode", choices=["default", "acceptEdits", "plan", "bypassPermissions"],
                   help="permission mode (default: default)")
    answer = p.add_mutually_exclusive_group()
    answer.add_argument("-y", "--yes", action="store_true",
                        help="allow every permission request once, without asking")
    answer.add_argument("--no", dest="reject", action="store_true",
                        help="reject every permission request, without asking")
    p.add_argument("--max-turns", type=int, help="upper bound on model calls")
    p.add_argument("--daemon", help="command that starts the daemon (default: this heddle)")
    resume = p.add_mutually_exclusive_group()
    resume.add_argument("-s", "--session", help="continue this session (an id from --continue's "
                        "output or the editor)")
    resume.add_argument("-c", "--continue", dest="continue_last", action="store_true",
                        help="continue the most recent session of the workspace")


class Renderer:
    """Prints a turn's events to a terminal: text as it streams, tools on their own lines."""

    def __init__(self, out: TextIO, color: bool):
        self.out = out
        self.color = color
        self.at_line_start = True
        self.titles: dict[str, str] = {}

    def _c(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def _line(self, text: str) -> None:
        if not self.at_line_start:
            self.out.write("\n")
        self.out.write(text + "\n")
        self.at_line_start = True

    def event(self, params: dict[str, Any]) -> None:
        ev = params.get("event", {})
        kind = ev.get("kind")
        if kind == "textDelta":
            self.out.write(ev["text"])
            self.at_line_start = ev["text"].endswith("\n")
        elif kind == "toolCallInput":
            self.titles[ev["toolCallId"]] = ev["title"]
            self._line(self._c("1;36", f"● {ev['title']}"))
        elif kind == "toolCallFinished":
            mark = {"ok": "└", "error": "✗", "rejected": "✗", "cancelled": "✗"}[ev["status"]]
            colour = "2" if ev["status"] == "ok" else "31"
            self._line(self._c(colour, f"  {mark} {ev['status'] if ev['status'] != 'ok' else ''}"
                               f"{': ' if ev['status'] != 'ok' else ''}{ev['summary']}"))
        elif kind == "permissionAnswered" and ev.get("reason"):
            self._line(self._c("33", f"  permission {ev['decision']}: {ev['reason']}"))
        elif kind == "retry":
            err = ev["error"]
            self._line(self._c("33", f"  retrying in {ev['delayMs'] / 1000:.1f} s "
                               f"(attempt {ev['attempt']}/{ev['maxAttempts']}): {err['message']}"))
        elif kind == "error":
            self._line(self._c("31", f"error: {ev['error']['message']}"))
        elif kind == "todo":
            marks = {"completed": "☒", "inProgress": "◐", "pending": "☐"}
            self._line(self._c("1", "Plan:"))
            for item in ev.get("todos", []):
                self._line(f"  {marks.get(item.get('status'), '☐')} {item.get('content', '')}")
        elif kind == "agent":
            inner = ev.get("event", {})
            if inner.get("kind") == "toolCallInput":
                self._line(self._c("36", f"    ↳ {inner['title']}"))
        elif kind == "modelFallback":
            self._line(self._c("33", f"  {ev['fromModel']} is overloaded; continuing with "
                               f"{ev['toModel']}"))
        elif kind == "compaction":
            self._line(self._c("2", f"  (context {ev['layer']}: {ev['tokensBefore']:,} -> "
                               f"{ev['tokensAfter']:,} tokens)"))
        self.out.flush()

    def diff(self, text: str) -> None:
        for line in text.splitlines():
            code = "32" if line.startswith("+") else "31" if line.startswith("-") else "2"
            self._line("    " + self._c(code, line))


def show_request(renderer: Renderer, params: dict[str, Any], heading: str) -> None:
    preview = params.get("preview") or {}
    renderer._line(renderer._c("1;33", f"{heading} {params['title']}"))
    if preview.get("kind") == "diff":
        renderer.diff(preview["diff"])
    elif preview.get("kind") == "command":
        renderer._line(f"    $ {preview['command']}    (in {preview['cwd']})")


async def _ask_user(renderer: Renderer, params: dict[str, Any]) -> dict[str, Any]:
    show_request(renderer, params, "? Allow")
    rule = next((o.get("rule") for o in params["options"] if o["decision"] == "allowAlways"), None)
    always = f"  [a] always allow {rule}" if rule else ""  # none for Heddle's own settings
    question = f"  [y] allow once{always}  [n] reject > "
    loop = asyncio.get_running_loop()
    while True:
        renderer.out.write(question)
        renderer.out.flush()
        line = await loop.run_in_executor(None, sys.stdin.readline)
        choice = line.strip().lower()
        if not line or choice in ("n", "no", "reject"):
            message = ""
            if line:
                renderer.out.write("  message for the agent (optional) > ")
                renderer.out.flush()
                message = (await loop.run_in_executor(None, sys.stdin.readline)).strip()
            renderer.at_line_start = True
            return {"decision": "reject", **({"message": message} if message else {})}
        if choice in ("y", "yes"):
            renderer.at_line_start = True
            return {"decision": "allowOnce"}
        if rule and choice in ("a", "always"):
            renderer.at_line_start = True
            return {"decision": "allowAlways", "rule": rule}


def daemon_command(args: argparse.Namespace) -> list[str]:
    if args.daemon:
        import shlex
        return shlex.split(args.daemon)
    return python_command("heddle", "serve")


async def ask(args: argparse.Namespace, out: TextIO = sys.stdout,
              env: dict[str, str] | None = None) -> int:
    """One turn; `env` is the daemon's environment (default: this process's as it started,
    with the secrets `secret_env` holds: the daemon takes them out of its own at once)."""
    workspace = str(Path(args.workspace).resolve())
    interactive = not args.yes and not args.reject and sys.stdin.isatty()
    env = secret_env.environ() if env is None else dict(env)
    env.setdefault("HEDDLE_LOG_LEVEL", "WARNING")
    proc = await asyncio.create_subprocess_exec(
        *daemon_command(args), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        env=env, limit=64 * 1024 * 1024)
    conn = Connection(proc.stdout, proc.stdin)
    renderer = Renderer(out, color=out.isatty() and "NO_COLOR" not in os.environ)
    conn.on_notification("turn/event", lambda params: renderer.event(params))
    errors: list[str] = []  # what the daemon said went wrong (`window/showMessage`, type 1)

    def show_message(params: dict[str, Any]) -> None:
        if params.get("type") == 1:
            errors.append(str(params.get("message")))
        elif params.get("type") == 2:  # a warning, such as untrusted project settings
            print(f"heddle: warning: {params.get('message')}", file=sys.stderr)

    conn.on_notification("window/showMessage", show_message)

    async def on_permission(params: dict[str, Any]) -> dict[str, Any]:
        if args.yes:
            show_request(renderer, params, "  allowed (--yes):")
            return {"decision": "allowOnce"}
        if args.reject:
            return {"decision": "reject", "message": "Rejected by --no (non-interactive run)."}
        return await _ask_user(renderer, params)

    conn.on_request("permission/request", on_permission)
    try:
        await conn.request("initialize", {
            "processId": os.getpid(), "rootUri": None, "clientInfo": {"name": "heddle ask"},
            "capabilities": {"experimental": {"heddle": {
                "permissionRequests": bool(interactive or args.yes or args.reject)}}}})
        conn.notify("initialized", {})
        session = await _open_session(conn, args, workspace, renderer)
        turn_params = {"sessionId": session["sessionId"], "prompt": " ".join(args.prompt),
                       **({"maxTurns": args.max_turns} if args.max_turns else {})}
        turn = asyncio.ensure_future(conn.request("turn/start", turn_params))
        loop = asyncio.get_running_loop()
        cancel = lambda: conn.notify("turn/cancel", {"sessionId": session["sessionId"]})  # noqa: E731
        loop.add_signal_handler(signal.SIGINT, cancel)
        try:
            result = await turn
        finally:
            loop.remove_signal_handler(signal.SIGINT)
        if not renderer.at_line_start:
            out.write("\n")
        usage = result["usage"]
        summary = (f"[{result['reason']}"
                   + (f" during {result['cancelPhase']}" if result.get("cancelPhase") else "")
                   + f" · {usage.get('modelCalls', 0)} model calls · "
                   f"{usage.get('inputTokens', 0)} in / {usage.get('outputTokens', 0)} out tokens]")
        print(summary + f" session {session['sessionId']}", file=sys.stderr)
        if result.get("error"):
            print(f"heddle: {result['error']['message']}", file=sys.stderr)
        return EXIT_CODES.get(result["reason"], 1)
    except (RpcError, ConnectionError) as exc:
        print(f"heddle: {errors[-1] if errors else exc}", file=sys.stderr)
        return 1
    finally:
        await _stop(conn, proc)


async def _open_session(conn: Connection, args: argparse.Namespace, workspace: str,
                        renderer: Renderer) -> dict[str, Any]:
    """A new session, or an earlier one brought back (its history is not re-printed)."""
    session_id = getattr(args, "session", None)
    if getattr(args, "continue_last", False):
        listed = (await conn.request("session/list", {"workspace": workspace}))["sessions"]
        if not listed:
            raise RpcError(-32010, f"no earlier session in {workspace}")
        session_id = listed[0]["sessionId"]
    if session_id is None:
        return await conn.request("session/new", {
            "workspace": workspace, **({"model": args.model} if args.model else {}),
            **({"permissionMode": args.mode} if args.mode else {})})
    printing = renderer.event
    renderer.event = lambda params: None  # the replayed history is not printed again
    try:
        loaded = await conn.request("session/load", {"sessionId": session_id})
    finally:
        renderer.event = printing
    print(f"[continuing session {loaded['sessionId']}: {loaded['title']} "
          f"({loaded['turns']} turns)]", file=sys.stderr)
    return loaded


async def _stop(conn: Connection, proc: asyncio.subprocess.Process) -> None:
    try:
        if proc.returncode is None:
            await asyncio.wait_for(conn.request("shutdown"), SHUTDOWN_TIMEOUT)
            conn.notify("exit")
            await asyncio.wait_for(proc.wait(), SHUTDOWN_TIMEOUT)
    except (asyncio.TimeoutError, RpcError, ConnectionError):
        pass
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def run(args: argparse.Namespace) -> int:
    return asyncio.run(ask(args))
