"""`heddle demo`: a real multi-step turn on a sample project, against the scripted model.

It starts the scripted model server on a free loopback port, copies the sample project to a
temporary folder, and runs `heddle ask` there: the daemon, the real SDK and real tools, with
a scripted model instead of a paid one. No API key is needed.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

SAMPLE = Path(__file__).parent / "scripted" / "sample"
PROMPT = "report.py crashes on an empty list of times. Please fix it."


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-y", "--yes", action="store_true",
                   help="allow the permission prompts without asking (the default when stdin "
                        "is not a terminal)")
    p.add_argument("--keep", action="store_true", help="keep the sample project afterwards")


def run(args: argparse.Namespace) -> int:
    from heddle import ask, secret_env
    from heddle.scripted import ScriptedServer, load_scenario

    server = ScriptedServer({"demo": load_scenario("demo")})
    workdir = Path(tempfile.mkdtemp(prefix="heddle-demo-"))
    project = workdir / "sample"
    shutil.copytree(SAMPLE, project, ignore=shutil.ignore_patterns("__pycache__"))
    auto = args.yes or not sys.stdin.isatty()
    try:
        with server.run_in_thread() as running:
            # the user's own credentials never go to the scripted model
            env = {name: value for name, value in secret_env.environ().items()
                   if name not in secret_env.MODEL_SECRETS}
            env.update(ANTHROPIC_BASE_URL=running.url, ANTHROPIC_API_KEY="demo")
            print(f"Heddle demo: a scripted model at {running.url}, a sample project in {project}")
            print(f"> {PROMPT}\n", flush=True)
            ask_args = argparse.Namespace(
                prompt=[PROMPT], workspace=str(project), model="demo", mode=None, yes=auto,
                reject=False, max_turns=None, daemon=None)
            code = ask.run(ask_args, env=env)
        fixed = "if not values" in (project / "stats.py").read_text()
        print(f"\nstats.py {'was fixed' if fixed else 'is unchanged'}; "
              f"{'kept in ' + str(project) if args.keep else 'the sample project is removed'}.")
        return code
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
