"""The `heddle` command: version, demo, and `ask` as a real client (non-interactive and on a tty)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import time

from e2e.test_turns import read_grep_edit


def heddle(args, env, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "heddle", *args], env=env, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL, **kw)


def test_version(daemon_env):
    result = heddle(["--version"], daemon_env)
    assert result.returncode == 0 and result.stdout.startswith("heddle 0.")


def test_bare_heddle_without_stdio_prints_usage(daemon_env):
    result = heddle([], daemon_env)
    assert result.returncode == 2 and "usage: heddle" in result.stderr


def test_demo_runs_a_multi_step_turn(daemon_env):
    result = heddle(["demo"], daemon_env)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for line in ["● Read report.py", "● Read stats.py", '● Search "average\\(" in .',
                 "● Edit stats.py", "+    if not values:", "● Run: python3 check_stats.py",
                 "  └ exit 0", "stats.py was fixed"]:
        assert line in out
    assert "[completed · 5 model calls" in result.stderr


def test_ask_with_yes_edits_and_exits_zero(daemon_env, scripted, workspace):
    scripted.add_scenario("edit", read_grep_edit())
    result = heddle(["ask", "-w", str(workspace), "-m", "edit", "-y", "use an f-string"], daemon_env)
    assert result.returncode == 0, result.stderr
    assert "I switched greet to an f-string." in result.stdout
    assert "f'Hello, {name}!'" in (workspace / "app.py").read_text()


def test_ask_with_no_rejects_and_model_error_exits_nonzero(daemon_env, scripted, workspace):
    scripted.add_scenario("edit", read_grep_edit())
    result = heddle(["ask", "-w", str(workspace), "-m", "edit", "--no", "go"], daemon_env)
    assert result.returncode == 0
    assert "✗ rejected" in result.stdout
    scripted.add_scenario("down", {"steps": [{"fault": {"status": 401}}]})
    failed = heddle(["ask", "-w", str(workspace), "-m", "down", "hi"], daemon_env)
    assert failed.returncode == 1
    assert "[modelError" in failed.stderr


def test_ask_interactive_reject_with_message(daemon_env, scripted, workspace):
    scripted.add_scenario("edit", read_grep_edit())
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "heddle", "ask", "-w", str(workspace), "-m",
                             "edit", "go"], env=daemon_env, stdin=slave, stdout=slave,
                            stderr=subprocess.PIPE, text=False)
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 30
    answers = [(b"[n] reject > ", b"n\n"), (b"(optional) > ", b"keep it as it is\n")]
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            seen += chunk
            if answers and answers[0][0] in seen:
                os.write(master, answers.pop(0)[1])
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    assert answers == [], seen.decode(errors="replace")
    assert proc.returncode == 0
    assert b"? Allow Edit app.py" in seen
    tool_result = scripted.requests_for("edit")[2].body["messages"][-1]["content"][0]
    assert "keep it as it is" in tool_result["content"]


def test_ask_continue_resumes_the_last_session(daemon_env, scripted, workspace):
    scripted.add_scenario("chat", {"steps": [
        {"content": [{"type": "text", "text": "First answer."}]},
        {"content": [{"type": "text", "text": "Second answer."}]}]})
    first = heddle(["ask", "-w", str(workspace), "-m", "chat", "remember 42"], daemon_env)
    assert first.returncode == 0 and "First answer." in first.stdout
    session_id = first.stderr.rsplit("session ", 1)[1].split()[0]
    second = heddle(["ask", "-w", str(workspace), "-c", "what number?"], daemon_env)
    assert second.returncode == 0, second.stderr
    assert "Second answer." in second.stdout and "First answer." not in second.stdout
    assert f"continuing session {session_id}: remember 42 (1 turns)" in second.stderr
    sent = scripted.requests_for("chat")[1].body["messages"]
    assert sent[0]["content"][0]["text"] == "remember 42"
    assert sent[-1]["content"][-1]["text"] == "what number?"
    missing = heddle(["ask", "-w", str(workspace), "-s", "f" * 32, "hi"], daemon_env)
    assert missing.returncode == 1 and "no session" in missing.stderr


def test_ask_says_why_the_daemon_cannot_start(daemon_env, workspace):
    env = {**daemon_env, "HEDDLE_CONTEXT_WINDOW": "lots"}
    result = heddle(["ask", "-w", str(workspace), "-y", "hello"], env)
    assert result.returncode == 1
    assert ("heddle: Heddle cannot start: HEDDLE_CONTEXT_WINDOW must be a whole number, "
            "not 'lots'") in result.stderr
    assert "Traceback" not in result.stderr


def test_always_allow_in_ask_holds_in_ask_continue(daemon_env, scripted, workspace):
    echo = {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": "echo hi"}}]}
    done = {"content": [{"type": "text", "text": "Done."}]}
    scripted.add_scenario("echo", {"steps": [echo, done, echo, done]})
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "heddle", "ask", "-w", str(workspace), "-m",
                             "echo", "say hi"], env=daemon_env, stdin=slave, stdout=slave,
                            stderr=subprocess.PIPE, text=False)
    os.close(slave)
    seen, answered = b"", False
    deadline = time.monotonic() + 30
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                seen += os.read(master, 4096)
            except OSError:
                break
            if not answered and b"[n] reject > " in seen:
                os.write(master, b"a\n")
                answered = True
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    assert answered and proc.returncode == 0, seen.decode(errors="replace")

    again = heddle(["ask", "-w", str(workspace), "-c", "once more"], daemon_env)  # no tty
    assert again.returncode == 0, again.stderr
    assert "? Allow" not in again.stdout
    result = scripted.requests_for("echo")[3].body["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and not result.get("is_error"), result
    assert "hi" in result["content"]
