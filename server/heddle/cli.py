"""The `heddle` command: serve (the stdio daemon), acp (the Agent Client Protocol door), ask (a
terminal client), sessions (what ask can continue), trust (a workspace's settings), demo,
version."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

import heddle
from heddle import secret_env
from heddle.envvars import log_level
from heddle.xdg import state_dir


class _OneLine(logging.Formatter):
    """Records without their traceback: editors show a daemon's stderr to the user, and a
    traceback there reads as a crash; the log file keeps it."""

    def format(self, record: logging.LogRecord) -> str:
        saved = record.exc_info, record.exc_text, record.stack_info
        record.exc_info = record.exc_text = record.stack_info = None
        try:
            return super().format(record)
        finally:
            record.exc_info, record.exc_text, record.stack_info = saved


LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def setup_logging(to_file: bool = True) -> str | None:
    """Logs to stderr and the log file. A bad HEDDLE_LOG_LEVEL logs at INFO and is returned,
    for the caller to report as the bad setting it is."""
    try:
        level, problem = log_level(os.environ), None
    except ValueError as exc:
        level, problem = "INFO", str(exc)
    stderr = logging.StreamHandler(sys.stderr)
    handlers: list[logging.Handler] = [stderr]
    if to_file:
        from heddle.private import PrivateLog, make_dirs
        own = not os.environ.get("HEDDLE_LOG_FILE")
        path = Path(os.environ.get("HEDDLE_LOG_FILE") or state_dir() / "heddle.log")
        try:
            make_dirs(path.parent, own_from=path.parent if own else None)
            handlers.append(PrivateLog(path, own, max_bytes=5_000_000, backups=2))
            # editors show a daemon's stderr as errors: with a log file, only warnings go there,
            # each on one line (tracebacks: the log file only)
            stderr.setLevel(logging.WARNING)
            stderr.setFormatter(_OneLine(LOG_FORMAT))
        except OSError as exc:
            print(f"heddle: cannot open log file {path}: {exc}", file=sys.stderr)
    logging.basicConfig(level=level, handlers=handlers, format=LOG_FORMAT)
    for noisy in ("pygls", "httpx2", "httpcore2", "anthropic"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLogger().level))
    # pygls logs every error reply with a traceback; the daemon logs real failures itself
    logging.getLogger("pygls.protocol.json_rpc").setLevel(logging.CRITICAL)
    return problem


SERVE_HELP = """\
Run the daemon: Language-Server-style JSON-RPC (Content-Length framing) over stdin and stdout,
for VS Code, Neovim and any other client of protocol/README.md. Editors start it themselves;
started by hand, it waits for a client on stdin.

The model endpoint comes from the environment (ANTHROPIC_API_KEY, or ANTHROPIC_BASE_URL for an
Anthropic-compatible endpoint; README.md lists the other variables). The daemon logs to
$XDG_STATE_HOME/heddle/heddle.log (HEDDLE_LOG_FILE); stderr gets warnings and errors only.
"""
SERVE_EPILOG = """\
Exit status: 0 when `exit` (or the end of stdin) follows `shutdown`, 1 when either comes
without it or a setting is bad, 130 after SIGINT, 143 after SIGTERM.
"""
ACP_HELP = """\
Run the Agent Client Protocol agent: newline-delimited JSON-RPC over stdin and stdout, for
Zed, JetBrains IDEs, CodeCompanion, avante.nvim, Emacs agent-shell and other ACP clients. It
runs the same core as `heddle serve`: the same sessions, tools, permissions and settings.

Point the editor's agent settings at the command `heddle` with the argument `acp`, and put
ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL) in the environment it starts it with; docs/acp.md
has each editor's settings.
"""
ACP_EPILOG = ("Exit status: 0 when the client closes stdin, 1 for a bad setting, 130 after "
              "SIGINT, 143 after SIGTERM.\n")
TRUST_HELP = """\
Show what a workspace's .heddle/settings.toml would enable (allow rules, a more permissive
mode, hooks, MCP servers, secrets passed to tools) and, once you say yes, trust that content.
Until then Heddle ignores what the file widens; a later change to it needs trusting again.
"""
DEMO_HELP = """\
Watch a real multi-step turn on a sample project: a scripted model server starts on a free
loopback port, the sample is copied to a temporary folder, and `heddle ask` runs there: read,
search, an edit behind a permission prompt, a check, the answer. No API key is needed.
"""


def _command(sub: Any, name: str, summary: str, description: str,
             epilog: str | None = None) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=summary, description=description, epilog=epilog,
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="heddle", description=heddle.__doc__)
    p.add_argument("--version", action="version", version=f"heddle {heddle.__version__}")
    p.add_argument("--stdio", action="store_true", help="serve over stdio (same as `heddle serve`)")
    sub = p.add_subparsers(dest="command")
    serve = _command(sub, "serve", "run the daemon over stdio (JSON-RPC, LSP framing)",
                     SERVE_HELP, SERVE_EPILOG)
    serve.add_argument("--stdio", action="store_true", help="accepted for editor clients; stdio is the only transport")
    _command(sub, "acp", "run the Agent Client Protocol agent over stdio (Zed, JetBrains, "
             "CodeCompanion, ...)", ACP_HELP, ACP_EPILOG)
    from heddle import ask, demo, sessions_command, trust_command
    ask.add_arguments(_command(sub, "ask", "ask the agent from the terminal", ask.DESCRIPTION))
    sessions_command.add_arguments(_command(
        sub, "sessions", "list a workspace's sessions, newest first", sessions_command.DESCRIPTION,
        sessions_command.EPILOG))
    trust_command.add_arguments(_command(
        sub, "trust", "review a workspace's .heddle/settings.toml and trust it", TRUST_HELP))
    demo.add_arguments(_command(sub, "demo", "watch a real multi-step turn on a sample "
                                "project, no API key needed", DEMO_HELP))
    return p


SERVE_ARGS = (["serve"], ["--stdio"], ["serve", "--stdio"], ["--stdio", "serve"])
"""How editors start the daemon: recognised without building the whole parser (that imports
the terminal client and the demo), because an editor waits for the daemon to start."""


def serve(problems: list[str]) -> int:
    bad_setting = setup_logging()
    for problem in problems:
        logging.getLogger("heddle.secret_env").warning("secrets: %s", problem)
    from heddle.rpc.boot import serve_stdio
    return serve_stdio(bad_setting)  # a bad setting: shown to the editor, then exit 1


def acp(problems: list[str]) -> int:
    bad_setting = setup_logging()
    for problem in problems:
        logging.getLogger("heddle.secret_env").warning("secrets: %s", problem)
    if bad_setting is not None:  # as the door reports a bad setting it reads itself
        logging.getLogger("heddle.acp.door").error("heddle acp stopped: %s", bad_setting)
        return 1
    from heddle.acp.door import serve_stdio
    return serve_stdio()


def main(argv: list[str] | None = None) -> int:
    # First, while there is no other thread and no child: the tools the daemon runs can read
    # the environment of the daemon and of `heddle ask`, its parent.
    problems = secret_env.hold()
    if (sys.argv[1:] if argv is None else argv) in SERVE_ARGS:
        return serve(problems)
    if (sys.argv[1:] if argv is None else argv) == ["acp"]:  # an editor waits for it, too
        return acp(problems)
    args = parser().parse_args(argv)
    if args.command in (None, "serve"):
        if args.command is None and not args.stdio:
            parser().print_help(sys.stderr)
            return 2
        return serve(problems)
    for problem in problems:
        print(f"heddle: secrets: {problem}", file=sys.stderr)
    if args.command == "ask":
        from heddle import ask
        return ask.run(args)
    if args.command == "sessions":
        from heddle import sessions_command
        return sessions_command.run(args)
    if args.command == "trust":
        from heddle import trust_command
        return trust_command.run(args)
    if args.command == "demo":
        from heddle import demo
        return demo.run(args)
    return 2
