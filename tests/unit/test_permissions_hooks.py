"""Hook commands: the runner, and what PreToolUse / PostToolUse results mean."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from heddle.permissions.hooks import (HookRunner, PostToolFeedback, PreToolVerdict,
                                      post_tool_use, pre_tool_use, run_hook)
from heddle.processes.environment import tool_env
from heddle.settings import HookCommand
from procs import all_dead

PY = sys.executable


def script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("import json, sys\nevent = json.load(sys.stdin)\n" + body)
    return f"{PY} {path}"


@pytest.fixture
def runner(tmp_path: Path) -> HookRunner:
    return HookRunner("s1", tmp_path, tool_env())


async def test_run_hook_passes_json_and_collects_results(tmp_path):
    cmd = script(tmp_path, "h.py", "print(json.dumps({'got': event}))\n"
                                   "print('note', file=sys.stderr)\nsys.exit(3)\n")
    result = await run_hook(cmd, {"a": [1, "x"]}, 10, tmp_path, tool_env())
    assert result.exit_code == 3 and not result.timed_out
    assert result.stdout_json == {"got": {"a": [1, "x"]}}
    assert result.stderr == "note\n"


async def test_run_hook_plain_output_and_unread_stdin(tmp_path):
    result = await run_hook("echo not json", {"big": "x" * 500_000}, 10, tmp_path, None)
    assert (result.exit_code, result.stdout_json, result.stdout) == (0, None, "not json\n")


async def test_run_hook_timeout_kills_its_process_group(tmp_path):
    # 2 s: time for the shell to write its pid file first, even on a loaded machine
    started = time.monotonic()
    result = await run_hook("sleep 30 & echo $! > bg.pid; sleep 30", {}, 2, tmp_path, None)
    assert result.timed_out and time.monotonic() - started < 20  # not the sleep 30
    pid = int((tmp_path / "bg.pid").read_text())
    assert await all_dead([pid])


async def test_hook_sees_the_event_and_no_secrets(tmp_path, runner, monkeypatch):
    cmd = script(tmp_path, "dump.py", "import os\njson.dump({'event': event, 'env': dict("
                                      "os.environ)}, open('seen.json', 'w'))\n")
    runner = HookRunner("s1", tmp_path, tool_env({"PATH": "/usr/bin:/bin",
                                                  "ANTHROPIC_API_KEY": "sk-x"}))
    await pre_tool_use([HookCommand(cmd)], runner, "Bash", {"command": "ls"}, "default")
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen["event"] == {"session_id": "s1", "cwd": str(tmp_path),
                             "hook_event_name": "PreToolUse", "permission_mode": "default",
                             "tool_name": "Bash", "tool_input": {"command": "ls"}}
    assert "ANTHROPIC_API_KEY" not in seen["env"]
    assert seen["env"]["HEDDLE_PROJECT_DIR"] == str(tmp_path)


async def test_pre_tool_use_exit_2_denies_with_stderr(tmp_path, runner):
    cmd = script(tmp_path, "no.py", "print('no rm here', file=sys.stderr)\nsys.exit(2)\n")
    verdict = await pre_tool_use([HookCommand(cmd, matcher="Bash")], runner, "Bash",
                                 {"command": "rm -rf x"}, "default")
    assert verdict == PreToolVerdict("deny", "no rm here")
    other = await pre_tool_use([HookCommand(cmd, matcher="Bash")], runner, "Read", {}, "default")
    assert other == PreToolVerdict()  # the matcher did not match


async def test_pre_tool_use_json_decisions_and_updated_input(tmp_path, runner):
    allow = script(tmp_path, "allow.py", "print(json.dumps({'decision': 'allow', 'reason': "
                                         "'read-only command'}))\n")
    modify = script(tmp_path, "modify.py", "inp = event['tool_input']\n"
                                           "inp['command'] += ' --dry-run'\n"
                                           "print(json.dumps({'updatedInput': inp}))\n")
    ask = script(tmp_path, "ask.py", "print(json.dumps({'decision': 'ask'}))\n")
    verdict = await pre_tool_use([HookCommand(modify), HookCommand(modify), HookCommand(allow)],
                                 runner, "Bash", {"command": "make"}, "default")
    assert verdict == PreToolVerdict("allow", "read-only command",
                                     {"command": "make --dry-run --dry-run"})
    asked = await pre_tool_use([HookCommand(ask), HookCommand(allow)], runner, "Bash",
                               {"command": "x"}, "default")
    assert asked.decision == "ask"  # ask beats allow, whatever the order
    deny = script(tmp_path, "deny.py", "print(json.dumps({'decision': 'deny', 'reason': 'r'}))\n")
    denied = await pre_tool_use([HookCommand(allow), HookCommand(deny)], runner, "Bash",
                                {"command": "x"}, "default")
    assert denied == PreToolVerdict("deny", "r")


async def test_failing_or_slow_hooks_have_no_say(tmp_path, runner, caplog):
    broken = HookCommand("exit 1")
    slow = HookCommand("sleep 5", timeout=0.2)
    verdict = await pre_tool_use([broken, slow, HookCommand("echo '{\"decision\": \"maybe\"}'")],
                                 runner, "Edit", {}, "default")
    assert verdict == PreToolVerdict()
    assert "failed (exit 1)" in caplog.text and "timed out after 0.2 s" in caplog.text
    assert "unknown decision 'maybe'" in caplog.text


async def test_post_tool_use_feedback(tmp_path, runner):
    lint = script(tmp_path, "lint.py", "assert event['tool_response'] == {'content': 'done', "
                                       "'is_error': False}\n"
                                       "print('line 3: unused import', file=sys.stderr)\n"
                                       "sys.exit(2)\n")
    context = HookCommand("echo '{\"additionalContext\": \"formatted with black\"}'")
    feedback = await post_tool_use([HookCommand(lint), context], runner, "Edit", {"path": "x"},
                                   "done", False)
    assert feedback == PostToolFeedback("line 3: unused import\nformatted with black", True)
    quiet = await post_tool_use([HookCommand("true")], runner, "Edit", {}, "done", False)
    assert quiet is None
