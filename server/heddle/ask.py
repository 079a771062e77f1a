"""`heddle ask`: a terminal client. Spawns the daemon, runs one turn, streams it to the terminal.

The daemon runs in a session of its own, so a Ctrl-C at the terminal reaches this client only:
the first one sends `turn/cancel` (the turn resolves `cancelled`, its tool processes are killed,
exit 130), a second one quits at once (the daemon is killed, and its reaper kills the tool
processes). The daemon logs to its log file; what it writes to stderr is shown only when it
stops without saying why.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any, Callable, TextIO

from heddle import secret_env, spawn
from heddle.client import Connection, RpcError
from heddle.envvars import no_model_endpoint
from heddle.sessions_command import WrongSession, resolve, shown_path, wrong_workspace
from heddle.terminal import (Renderer, Stdout, TerminalLines, ask_loop, ask_user, clean, plural,
                             printable, show_request)

EXIT_CODES = {"completed": 0, "cancelled": 130}
WHOLE_ID = re.compile(r"[0-9a-f]{32}")
"""A session id as the daemon gives it (not only the start of one)."""
INTERRUPTED = 130
STDOUT_GONE = 141
"""Exit status when nobody reads the answer any more (a closed pipe): 128 + SIGPIPE, as a
command killed by SIGPIPE reports."""

DESCRIPTION = """\
Ask the agent from the terminal: starts the daemon, runs one turn on the workspace and streams
it here (the answer and the tools on stdout; the model's thinking, dimmed, and the rest on
stderr). The session is kept: -c continues the
workspace's latest, -s a given one (`heddle sessions` lists them).
"""
EPILOG = """\
environment:
  ANTHROPIC_API_KEY    key for the model endpoint (never passed on to tool processes)
  ANTHROPIC_BASE_URL   an Anthropic-compatible endpoint (default: Anthropic's API); with it
                       set, ANTHROPIC_API_KEY may be left unset or empty (a local model
                       server that checks no key). With neither set, nothing is started.
  HEDDLE_MODEL         the model when neither -m nor the settings files' model names one
  (README.md lists the others)

On a terminal, every edit and command that needs permission is asked about. Without one (a
pipe, a script), say how to answer: -y allows, --no rejects, --mode acceptEdits allows edits,
--mode bypassPermissions allows everything.

Ctrl-C cancels the turn; a second Ctrl-C quits at once.
Exit status: 0 the turn completed, 130 it was cancelled, 2 an empty prompt or a wrong command
line (a workspace that is not a folder, a session id that names no session or several), 141
stdout was closed (a pipe whose reader stopped: the turn is cancelled), 1 anything else.
"""

OTHER_MODEL = ("heddle: pick another model with -m MODEL (or HEDDLE_MODEL, or `model` in "
               "the settings files)")
OTHER_MODEL_CONTINUED = ("heddle: a continued session keeps its model; to use another one, "
                         "start a new session (without -c or -s) with -m MODEL")

NO_TERMINAL = ("heddle: {title} needs permission, but stdin is not a terminal to ask on, so "
               "it was rejected. To answer without asking, run with -y (allow), --no (reject), "
               "--mode acceptEdits (allow edits) or --mode bypassPermissions (allow everything).")


def answer_plan(renderer: Renderer, params: dict[str, Any], args: argparse.Namespace
                ) -> dict[str, Any]:
    """A plan when the user is not asked (-y, --no, no terminal): printed, then approved in
    mode default with -y (each edit and command after it is then allowed by -y too), else
    kept in plan mode, and the model is told to give the plan in its answer."""
    if args.yes:
        show_request(renderer, params, "  approved (--yes), mode default:")
        return {"decision": "allowOnce", "mode": "default"}
    show_request(renderer, params, "  not approved (--no):" if args.reject
                 else "  not approved (no terminal to ask on):")
    why = "--no" if args.reject else "no terminal"
    return {"decision": "reject", "message": f"Nobody can approve a plan in this run ({why}); "
            "stay in plan mode and end your answer with the plan, so the user can read it."}


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = EPILOG
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("prompt", nargs="+", help="what to ask")
    p.add_argument("-w", "--workspace", default=".", help="workspace folder (default: the current one)")
    p.add_argument("-m", "--model", help="model id (default: the settings files' model, else "
                                         "HEDDLE_MODEL, else the built-in default)")
    p.add_argument("--mode", choices=["default", "acceptEdits", "plan", "bypassPermissions"],
                   help="permission mode (default: permissions.mode of the settings files, "
                        "else default)")
    answer = p.add_mutually_exclusive_group()
    answer.add_argument("-y", "--yes", action="store_true",
                        help="allow every permission request once, without asking")
    answer.add_argument("--no", dest="reject", action="store_true",
                        help="reject every permission request, without asking")
    p.add_argument("--max-turns", type=_positive, help="upper bound on model calls")
    p.add_argument("--daemon", help="command that starts the daemon (default: this heddle)")
    resume = p.add_mutually_exclusive_group()
    resume.add_argument("-s", "--session", metavar="ID",
                        help="continue this session: its id, or the start of it that `heddle "
                             "sessions` shows")
    resume.add_argument("-c", "--continue", dest="continue_last", action="store_true",
                        help="continue the most recent session of the workspace")


class CtrlC:
    """SIGINT while `heddle ask` runs: the first press cancels the running turn (or quits, if
    none runs), the next one quits."""

    def __init__(self) -> None:
        self.presses = 0
        self.cancel: Callable[[], None] | None = None
        """Cancels the running turn; None while no turn runs."""
        self.quit = asyncio.Event()

    def pressed(self) -> None:
        self.presses += 1
        if self.presses == 1 and self.cancel is not None:
            self.cancel()
        else:
            self.quit.set()


async def ask(args: argparse.Namespace, out: TextIO | None = None,
              env: dict[str, str] | None = None) -> int:
    """One turn; `env` is the daemon's environment (default: this process's as it started,
    with the secrets `secret_env` holds: the daemon takes them out of its own at once)."""
    loop = asyncio.get_running_loop()
    ctrl_c = CtrlC()
    loop.add_signal_handler(signal.SIGINT, ctrl_c.pressed)
    try:
        env = secret_env.environ() if env is None else dict(env)
        # Said before a daemon starts, so that no session is kept for a turn that cannot run.
        # Another daemon command (--daemon) may bring its own environment: it says it itself.
        if args.daemon is None and (problem := no_model_endpoint(env)):
            print(f"heddle: {problem}", file=sys.stderr)
            return 1
        argv = spawn.command(args.daemon)
        try:
            daemon = await spawn.Daemon.start(argv, env)
        except OSError as exc:
            print(spawn.cannot_start(argv, exc), file=sys.stderr)
            return 1
        try:
            return await _with_daemon(args, Stdout(out or sys.stdout), daemon, ctrl_c)
        finally:
            daemon.kill()  # quitting: its reaper kills the tool processes
            await daemon.proc.wait()
    finally:
        loop.remove_signal_handler(signal.SIGINT)


async def _with_daemon(args: argparse.Namespace, out: Stdout, daemon: spawn.Daemon,
                       ctrl_c: CtrlC) -> int:
    """Run the turn and stop the daemon, unless a Ctrl-C says to quit first."""
    renderer = Renderer(out, color=out.isatty() and "NO_COLOR" not in os.environ,
                        live=out.isatty(), thoughts=sys.stderr,
                        dim_thoughts=sys.stderr.isatty() and "NO_COLOR" not in os.environ)
    talk = asyncio.ensure_future(_talk(args, daemon, renderer, ctrl_c, out))
    quit_ = asyncio.ensure_future(ctrl_c.quit.wait())
    try:
        await asyncio.wait([talk, quit_], return_when=asyncio.FIRST_COMPLETED)
        if talk.done():
            code = talk.result()
            stop = asyncio.ensure_future(daemon.stop())
            await asyncio.wait([stop, quit_], return_when=asyncio.FIRST_COMPLETED)
            stop.cancel()
            return code
        renderer.end_line()
        print("heddle: quit", file=sys.stderr)
        return INTERRUPTED
    finally:
        for task in (talk, quit_, daemon.stderr.task):
            task.cancel()
        await asyncio.gather(talk, quit_, return_exceptions=True)


async def _talk(args: argparse.Namespace, daemon: spawn.Daemon, renderer: Renderer,
                ctrl_c: CtrlC, out: Stdout) -> int:
    conn = daemon.conn
    workspace = str(Path(args.workspace).resolve())
    interactive = sys.stdin is not None and sys.stdin.isatty()
    lines = TerminalLines(sys.stdin.fileno()) if interactive else None
    conn.on_notification("turn/event", lambda params: renderer.event(params))
    warned: set[str] = set()

    def warn(message: str) -> None:
        if message not in warned:
            warned.add(message)
            renderer.end_line()
            print(f"heddle: warning: {clean(message)}", file=sys.stderr)

    def show_message(params: dict[str, Any]) -> None:
        daemon.announced(params)
        if params.get("type") == 2:  # a warning, such as untrusted project settings
            warn(str(params.get("message")))

    def show_mcp_change(params: dict[str, Any]) -> None:
        renderer.end_line()
        print("\n".join(mcp_change_lines(params)), file=sys.stderr)

    conn.on_notification("window/showMessage", show_message)
    conn.on_notification("mcpServer/changed", show_mcp_change)
    hinted = False

    async def on_permission(params: dict[str, Any]) -> dict[str, Any]:
        nonlocal hinted
        if (params.get("preview") or {}).get("kind") == "plan" and (
                lines is None or args.yes or args.reject):
            return answer_plan(renderer, params, args)
        if params.get("loop"):  # the repeat guard asks whether the turn may go on
            if lines is None or args.yes or args.reject:
                why = "-y" if args.yes else "--no" if args.reject else "no terminal to ask on"
                show_request(renderer, params, f"  stopping the turn ({why}):")
                return {"decision": "reject"}
            return await ask_loop(renderer, lines, params)
        if args.yes:
            show_request(renderer, params, "  allowed (--yes):")
            return {"decision": "allowOnce"}
        if args.reject:
            return {"decision": "reject", "message": "Rejected by --no (non-interactive run)."}
        if lines is None:
            if not hinted:
                renderer.end_line()
                print(NO_TERMINAL.format(title=clean(params["title"], one_line=True)),
                      file=sys.stderr)
                hinted = True
            return {"decision": "reject", "message": "The user cannot be asked (no terminal), "
                    "so this was rejected."}
        return await ask_user(renderer, lines, params)

    def cancel() -> None:
        conn.notify("turn/cancel", {"sessionId": session["sessionId"]})
        renderer.end_line()
        print("heddle: cancelling the turn (Ctrl-C again to quit at once)", file=sys.stderr)

    conn.on_request("permission/request", on_permission)
    try:
        await daemon.initialize("heddle ask", {"experimental": {"heddle": {
            "permissionRequests": True, "reviewHunks": True}}})
        session, continued = await _open_session(conn, args, workspace, renderer)
        for message in session.get("warnings", []):  # problems in the settings files, repairs
            warn(message)
        for line in instruction_lines(session.get("instructions", [])):
            print(line, file=sys.stderr)
        turn_params = {"sessionId": session["sessionId"], "prompt": " ".join(args.prompt),
                       **({"maxTurns": args.max_turns} if args.max_turns else {})}
        ctrl_c.cancel = cancel
        turn = asyncio.ensure_future(conn.request("turn/start", turn_params))
        gone = asyncio.ensure_future(out.gone.wait())
        try:
            await asyncio.wait([turn, gone], return_when=asyncio.FIRST_COMPLETED)
            if out.gone.is_set():  # nobody reads the answer: end the turn, say nothing
                if not turn.done():
                    conn.notify("turn/cancel", {"sessionId": session["sessionId"]})
                    await asyncio.wait([turn], timeout=spawn.SHUTDOWN_TIMEOUT)
                return STDOUT_GONE
            result = turn.result()
        finally:
            ctrl_c.cancel = None
            gone.cancel()
            turn.cancel()
            await asyncio.gather(turn, gone, return_exceptions=True)
        renderer.end_line()
        # A turn that failed before the model answered (no key, an unknown model) used
        # nothing: its reason, below, is all there is to say.
        if not result.get("error") or any(result["usage"].values()):
            summary = clean(turn_summary(result) + f" session {session['sessionId']}")
            dim = sys.stderr.isatty() and "NO_COLOR" not in os.environ
            print(f"\x1b[2m{summary}\x1b[0m" if dim else summary, file=sys.stderr)
        if result.get("error"):
            print(f"heddle: {clean(result['error']['message'])}", file=sys.stderr)
            if result["error"]["code"] == "unknownModel":
                print(OTHER_MODEL_CONTINUED if continued else OTHER_MODEL, file=sys.stderr)
        return EXIT_CODES.get(result["reason"], 1)
    except WrongSession as exc:
        print(exc, file=sys.stderr)
        return 2
    except RpcError as exc:
        renderer.end_line()
        print(daemon.refused(exc), file=sys.stderr)
        return 1
    except ConnectionError:
        renderer.end_line()
        for line in await daemon.lost():
            print(line, file=sys.stderr)
        return 1


def instruction_lines(files: list[dict[str, Any]]) -> list[str]:
    """The instruction files in force (`instructions` of `session/new` or `session/load`), one
    line for stderr: `heddle: instructions: ~/.config/heddle/AGENTS.md, AGENTS.md (cut)`."""
    if not files:
        return []
    home = os.path.expanduser("~")

    def shown(f: dict[str, Any]) -> str:
        path = str(f.get("path", ""))
        path = "~" + path[len(home):] if home != "/" and path.startswith(home + "/") else path
        return clean(path) + (" (cut to fit the cap)" if f.get("truncated") else "")
    return [f"heddle: instructions: {', '.join(shown(f) for f in files)}"]


def mcp_change_lines(params: dict[str, Any]) -> list[str]:
    """An MCP server's change (`mcpServer/changed`) as lines for stderr: its message, marked
    as a warning or an error by its state, then what the server last wrote to its stderr."""
    state = params.get("server", {}).get("state")
    kind = {"failed": "error: ", "restarting": "warning: "}.get(state, "")
    stderr = [f"  {printable(line)}" for line in params.get("stderr", [])]
    return [f"heddle: {kind}{clean(params.get('message', ''), one_line=True)}"] + (
        ["  its last output:"] + stderr if stderr else [])


def turn_summary(result: dict[str, Any]) -> str:
    """The line after a turn: how it ended, its model calls, the tokens in (all input, cached
    or not) and out, and the share of the input read from the prompt cache."""
    usage = result["usage"]
    read = usage.get("cacheReadInputTokens", 0)
    tokens_in = usage.get("inputTokens", 0) + read + usage.get("cacheCreationInputTokens", 0)
    cached = f" ({read / tokens_in:.0%} from cache)" if tokens_in else ""
    return (f"[{result['reason']}"
            + (f" during {result['cancelPhase']}" if result.get("cancelPhase") else "")
            + f" · {plural(usage.get('modelCalls', 0), 'model call')} · "
            f"{tokens_in} in{cached} / {usage.get('outputTokens', 0)} out tokens]")


async def _open_session(conn: Connection, args: argparse.Namespace, workspace: str,
                        renderer: Renderer) -> tuple[dict[str, Any], bool]:
    """A new session, or an earlier one brought back (its history is not re-printed); and
    whether it was brought back."""
    session_id = getattr(args, "session", None)
    if getattr(args, "continue_last", False):
        listed = (await conn.request("session/list", {"workspace": workspace}))["sessions"]
        if not listed:
            raise RpcError(-32010, f"no earlier session in {workspace}")
        session_id = listed[0]["sessionId"]
    elif session_id is not None and not WHOLE_ID.fullmatch(session_id):
        # the start of an id, as `heddle sessions` shows it (a whole id is loaded as it is, so
        # a transcript the list skips still gets its own reason)
        session_id = await resolve(conn, session_id, workspace)
    if session_id is None:
        return await conn.request("session/new", {
            "workspace": workspace, **({"model": args.model} if args.model else {}),
            **({"permissionMode": args.mode} if args.mode else {})}), False
    printing = renderer.event
    renderer.event = lambda params: None  # the replayed history is not printed again
    try:
        loaded = await conn.request("session/load", {"sessionId": session_id})
    finally:
        renderer.event = printing
    turns = loaded["turns"]
    print(f"[continuing session {loaded['sessionId']}: {clean(loaded['title'])} "
          f"({plural(turns, 'turn')})]", file=sys.stderr)
    if loaded["workspace"] != workspace:  # -w (or the current folder) names another one
        print(f"heddle: the session works in {clean(loaded['workspace'])}, not {workspace}",
              file=sys.stderr)
    # A loaded session keeps the model and mode it was created with (session/load takes
    # neither), so say so rather than drop the option silently.
    if args.model and args.model != loaded["model"]:
        print(f"heddle: -m {args.model} is ignored: a continued session keeps its model "
              f"({clean(loaded['model'])})", file=sys.stderr)
    if args.mode and args.mode != loaded["permissionMode"]:
        print(f"heddle: --mode {args.mode} is ignored: a continued session keeps its mode "
              f"({loaded['permissionMode']})", file=sys.stderr)
    return loaded, True


def _wrong_command_line(args: argparse.Namespace) -> str | None:
    """What makes the command line one `heddle ask` cannot run, if anything."""
    if not " ".join(args.prompt).strip():  # the words together: `ask fix ""` is a prompt
        return "heddle ask: error: the prompt is empty"
    if args.model is not None and not args.model.strip():  # not "use the default"
        return "heddle ask: error: the model name is empty"
    session = getattr(args, "session", None)
    if session is not None and not session.strip():  # its start would name every session
        return "heddle ask: error: the session id is empty"
    wrong = wrong_workspace(str(Path(args.workspace).resolve()))
    if wrong:
        return wrong
    # JSON-RPC carries text: a name that is not UTF-8 (the OS hands it over with surrogate
    # escapes) cannot be sent, so say so here rather than fail mid-request.
    for what, value in (("the prompt", " ".join(args.prompt)), ("the model name", args.model),
                        ("the session id", session)):
        try:
            (value or "").encode("utf-8")
        except UnicodeEncodeError:
            return (f"heddle: {what} {shown_path(value)} is not valid UTF-8, so it cannot be "
                    "sent to the daemon")
    return None


def run(args: argparse.Namespace, env: dict[str, str] | None = None) -> int:
    if sys.stdout is None:  # `heddle ask ... >&-`
        print("heddle: stdout is closed, so there is nowhere to show the answer",
              file=sys.stderr)
        return 1
    wrong = _wrong_command_line(args)
    if wrong:
        print(wrong, file=sys.stderr)
        return 2
    try:
        return asyncio.run(ask(args, env=env))
    except KeyboardInterrupt:  # a Ctrl-C before the handler was set up or after it was removed
        return INTERRUPTED
