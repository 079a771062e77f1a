"""The `heddle` command: serve (the stdio daemon), acp (the Agent Client Protocol door), ask (a
terminal client), trust (a workspace's settings), demo, version."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

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
        from logging.handlers import RotatingFileHandler
        path = Path(os.environ.get("HEDDLE_LOG_FILE") or state_dir() / "heddle.log")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            handlers.append(RotatingFileHandler(path, maxBytes=5_000_000, backupCount=2))
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


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="heddle", description=heddle.__doc__)
    p.add_argument("--version", action="version", version=f"heddle {heddle.__version__}")
    p.add_argument("--stdio", action="store_true", help="serve over stdio (same as `heddle serve`)")
    sub = p.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="run the daemon over stdio (JSON-RPC, LSP framing)")
    serve.add_argument("--stdio", action="store_true", help="accepted for editor clients; stdio is the only transport")
    sub.add_parser("acp", help="run the Agent Client Protocol agent over stdio (Zed, JetBrains, "
                   "CodeCompanion, ...)")
    from heddle import ask, demo, trust_command
    ask.add_arguments(sub.add_parser("ask", help="ask the agent from the terminal"))
    trust_command.add_arguments(sub.add_parser(
        "trust", help="review a workspace's .heddle/settings.toml and trust it"))
    demo.add_arguments(sub.add_parser("demo", help="watch a real multi-step turn on a sample project, no API key needed"))
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
    if args.command == "trust":
        from heddle import trust_command
        return trust_command.run(args)
    if args.command == "demo":
        from heddle import demo
        return demo.run(args)
    return 2
