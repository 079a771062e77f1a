"""The API key and other secrets stay out of reach of the tools: a real `heddle ask`, its real
daemon and a real Bash call that looks for them everywhere a process of the user can look."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from e2e.test_cli import HEDDLE
from e2e.test_permissions import last_results, steps, tool, write_settings

KEY = "sk-ant-held-0123456789"
SECRETS = {"ANTHROPIC_API_KEY": KEY, "MY_SERVICE_TOKEN": "tok-held-4242",
           "MY_PASSED_TOKEN": "tok-passed-777"}
VISIBLE = "HEDDLE_TEST_VISIBLE=seen-in-the-environment"

LOOK = r"""
parent=$PPID
grandparent=$(sed 's/.*) //' /proc/$parent/stat | cut -d' ' -f2)
echo "== parent environ"; tr '\0' '\n' < /proc/$parent/environ
echo "== parent cmdline"; tr '\0' ' ' < /proc/$parent/cmdline; echo
echo "== grandparent environ"; tr '\0' '\n' < /proc/$grandparent/environ
echo "== grandparent cmdline"; tr '\0' ' ' < /proc/$grandparent/cmdline; echo
echo "== own environment"; env
echo "== ps"; ps eww -p $parent -p $grandparent
"""


def sections(output: str) -> dict[str, str]:
    parts = output.split("== ")[1:]
    return {part.split("\n", 1)[0]: part.split("\n", 1)[1] for part in parts}


def ask(env: dict[str, str], workspace: Path, model: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([HEDDLE, "ask", "-m", model, "-y", "go"], env=env, cwd=workspace,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                          **kw)


def test_no_tool_can_read_the_secrets_of_the_daemon_or_of_heddle_ask(daemon_env, scripted,
                                                                      workspace, tmp_path):
    user_settings = Path(daemon_env["XDG_CONFIG_HOME"]) / "heddle/settings.toml"
    write_settings(user_settings, '[tools]\npass_env = ["MY_PASSED_TOKEN"]\n')
    scripted.add_scenario("look", steps(tool("Bash", command=LOOK)))
    # Dumpable, so that /proc/PID/environ stays readable to any reader: this test is about
    # what it shows (the next one is about not dumpable).
    env = {**daemon_env, **SECRETS, "ANTHROPIC_API_KEY": KEY, "HEDDLE_DUMPABLE": "1",
           "HEDDLE_TEST_VISIBLE": VISIBLE.split("=", 1)[1]}

    run = ask(env, workspace, "look")

    assert run.returncode == 0, run.stderr
    (result,) = last_results(scripted, "look")
    seen = sections(result["content"])
    assert set(seen) == {"parent environ", "parent cmdline", "grandparent environ",
                         "grandparent cmdline", "own environment", "ps"}, result["content"]
    # what was read is the daemon's and `heddle ask`'s, and the reads worked
    assert " serve" in seen["parent cmdline"] and " ask " in seen["grandparent cmdline"]
    for place in ("parent environ", "grandparent environ", "own environment", "ps"):
        assert VISIBLE in seen[place], place
    for secret in SECRETS.values():
        for place in ("parent environ", "grandparent environ", "parent cmdline",
                      "grandparent cmdline", "ps"):
            assert secret not in seen[place], (place, secret)
    own = seen["own environment"].splitlines()
    assert "MY_PASSED_TOKEN=tok-passed-777" in own  # held by the daemon, passed on as set
    assert not [line for line in own if line.startswith("ANTHROPIC_") or "tok-held" in line]
    # the daemon still holds the key: every model request carried it
    requests = scripted.requests_for("look")
    assert len(requests) == 2 and all(KEY in str(r.headers.values()) for r in requests)
    log = (tmp_path / "heddle.log").read_text()
    transcripts = [p.read_text() for p in (tmp_path / "state").rglob("*.jsonl")]
    assert transcripts and "parent environ" in transcripts[0]
    for text in (run.stdout, run.stderr, log, *transcripts):
        assert KEY not in text and "tok-held-4242" not in text


PRIVATE = r"""
if cat /proc/$PPID/environ >/dev/null 2>&1; then echo environ readable; else echo environ refused; fi
if (exec 3</proc/$PPID/mem) 2>/dev/null; then echo mem readable; else echo mem refused; fi
"""


def without_capabilities() -> list[str]:
    """A prefix that runs a command with no capabilities (root's CAP_SYS_PTRACE reads any
    process), so the kernel's same-user rules apply as to any user's process."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root and setpriv (util-linux) is not installed")
    return [setpriv, "--bounding-set=-all", "--inh-caps=-all", "--"]


def test_the_daemon_is_not_dumpable_so_its_memory_is_private(daemon_env, scripted, workspace):
    scripted.add_scenario("private", {"steps": [
        {"content": [tool("Bash", command=PRIVATE)]}, {"content": [{"type": "text", "text": "ok"}]},
        {"content": [tool("Bash", command=PRIVATE)]}, {"content": [{"type": "text", "text": "ok"}]}]})
    command = [*without_capabilities(), HEDDLE, "ask", "-m", "private", "-y", "go"]

    def run(env):
        done = subprocess.run(command, env=env, cwd=workspace, capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stderr
        (result,) = last_results(scripted, "private")
        return [line for line in result["content"].splitlines()
                if line.startswith(("environ ", "mem "))]

    # the same-user rule that not dumpable switches off: with it, both are readable
    assert run(dict(daemon_env, HEDDLE_DUMPABLE="1")) == ["environ readable", "mem readable"]
    assert run(daemon_env) == ["environ refused", "mem refused"]
