"""The `heddle` command: version, demo, and `ask` as a real client (non-interactive and on a tty).

`heddle` here is the console script, as users run it; the demo and `ask` run in a folder full of
modules named like Heddle's own, which the daemon they start must not import."""

from __future__ import annotations

import os
import pty
import select
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from e2e.test_turns import read_grep_edit
from procs import alive, wait_dead

HEDDLE = str(Path(sys.executable).with_name("heddle"))


def heddle(args, env, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([HEDDLE, *args], env=env, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL, **kw)


def test_version(daemon_env):
    result = heddle(["--version"], daemon_env)
    assert result.returncode == 0 and result.stdout.startswith("heddle 0.")


def test_bare_heddle_without_stdio_prints_usage(daemon_env):
    result = heddle([], daemon_env)
    assert result.returncode == 2 and "usage: heddle" in result.stderr


@pytest.mark.parametrize("command, says", [
    ("serve", "JSON-RPC"), ("acp", "Agent Client Protocol"), ("ask", "runs one turn"),
    ("trust", ".heddle/settings.toml"), ("demo", "scripted model server"),
    ("sessions", "newest first")])
def test_each_command_explains_itself_with_help(daemon_env, command, says):
    result = heddle([command, "--help"], daemon_env)
    assert result.returncode == 0 and result.stderr == ""
    usage, description = result.stdout.split("\n\n")[:2]
    assert usage.startswith(f"usage: heddle {command} ") and says in description, result.stdout
    assert not description.startswith(("options:", "positional arguments:")), result.stdout


def test_demo_runs_a_multi_step_turn(daemon_env, shadowed_workspace):
    result = heddle(["demo"], daemon_env, cwd=shadowed_workspace)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for line in ["● Read report.py", "● Read stats.py", '● Search "average\\(" in .',
                 "● Edit stats.py", "+    if not values:", "● Run: python3 check_stats.py",
                 "  └ exit 0", "stats.py was fixed"]:
        assert line in out
    assert "[completed · 5 model calls" in result.stderr


def test_ask_with_yes_edits_and_exits_zero(daemon_env, scripted, shadowed_workspace):
    workspace = shadowed_workspace  # also the working folder: `heddle ask` run in a project
    scripted.add_scenario("edit", read_grep_edit())
    result = heddle(["ask", "-m", "edit", "-y", "use an f-string"], daemon_env, cwd=workspace)
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
    assert "[modelError" not in failed.stderr  # no usage line: the model answered nothing
    said = failed.stderr.rsplit("heddle: ", 1)[1].strip()
    assert said and (failed.stdout + failed.stderr).count(said) == 1  # once, not the daemon too


def test_ask_interactive_reject_with_message(daemon_env, scripted, workspace):
    scripted.add_scenario("edit", read_grep_edit())
    master, slave = pty.openpty()
    proc = subprocess.Popen([HEDDLE, "ask", "-w", str(workspace), "-m",
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
    second = heddle(["ask", "-w", str(workspace), "-c", "-m", "other", "what number?"],
                    daemon_env)
    assert second.returncode == 0, second.stderr
    assert ("heddle: -m other is ignored: a continued session keeps its model (chat)"
            in second.stderr)
    assert "Second answer." in second.stdout and "First answer." not in second.stdout
    assert f"continuing session {session_id}: remember 42 (1 turn)" in second.stderr
    sent = scripted.requests_for("chat")[1].body["messages"]
    assert sent[0]["content"][-1]["text"] == "remember 42"
    assert sent[-1]["content"][-1]["text"] == "what number?"
    missing = heddle(["ask", "-w", str(workspace), "-s", "f" * 32, "hi"], daemon_env)
    # a whole id is loaded as it is: the daemon says why it cannot be (exit 1)
    assert missing.returncode == 1 and f"no session '{'f' * 32}'" in missing.stderr
    elsewhere = workspace.parent / "elsewhere"
    elsewhere.mkdir()
    third = heddle(["ask", "-w", str(elsewhere), "-s", session_id, "and now?"], daemon_env)
    assert f"heddle: the session works in {workspace}, not {elsewhere}" in third.stderr


def test_ask_at_its_turn_limit_says_so_in_the_singular(daemon_env, scripted, workspace):
    scripted.add_scenario("read", {"steps": [
        {"content": [{"type": "tool_use", "name": "Read", "input": {"path": "app.py"}}]}]})
    result = heddle(["ask", "-w", str(workspace), "-m", "read", "--max-turns", "1", "go"],
                    daemon_env)
    assert result.returncode == 1
    assert "heddle: stopped after 1 model call\n" in result.stderr, result.stderr
    assert "[maxTurns · 1 model call ·" in result.stderr


def test_ask_with_an_unknown_model_says_what_is_wrong_and_what_to_do(daemon_env, scripted,
                                                                     workspace):
    scripted.add_scenario("chat", {"steps": [{"content": [{"type": "text", "text": "Hi."}]}]})
    unknown = ("heddle: the model endpoint does not know the model 'claude-nonesuch' (it "
               "answered 404 \"model: claude-nonesuch\"): choose a model it serves: chat\n")
    new = heddle(["ask", "-w", str(workspace), "-m", "claude-nonesuch", "hi"], daemon_env)
    assert new.returncode == 1
    assert new.stderr == unknown + ("heddle: pick another model with -m MODEL (or "
                                    "HEDDLE_MODEL, or `model` in the settings files)\n")
    again = heddle(["ask", "-w", str(workspace), "-c", "hi"], daemon_env)
    assert again.returncode == 1
    assert again.stderr.endswith(unknown + (
        "heddle: a continued session keeps its model; to use another one, start a new session "
        "(without -c or -s) with -m MODEL\n")), again.stderr


def test_ask_without_a_key_or_an_endpoint_says_so_first_and_keeps_no_session(daemon_env,
                                                                              workspace):
    env = {k: v for k, v in daemon_env.items() if not k.startswith("ANTHROPIC_")}
    said = ("heddle: ANTHROPIC_API_KEY is not set: set it to your Anthropic API key, or set "
            "ANTHROPIC_BASE_URL to an Anthropic-compatible endpoint (one that checks no key "
            "needs none)\n")
    result = heddle(["ask", "-w", str(workspace), "hi"], env)
    assert (result.returncode, result.stdout, result.stderr) == (1, "", said)
    sessions = Path(daemon_env["XDG_STATE_HOME"]) / "heddle" / "sessions"
    assert not sessions.exists() or list(sessions.iterdir()) == []
    # a daemon of its own (--daemon) says it at the turn: the reason, and no usage line
    daemon = f"{shlex.quote(sys.executable)} -I -m heddle serve"
    result = heddle(["ask", "-w", str(workspace), "--daemon", daemon, "hi"], env)
    assert (result.returncode, result.stderr) == (1, said)


def test_ask_refuses_an_empty_prompt_and_a_turn_limit_below_one(daemon_env, workspace):
    for args, why in ((["  ", ""], "the prompt is empty"), (["--max-turns", "0", "hi"],
                                                               "must be at least 1, not 0"),
                      (["-m", "", "hi"], "the model name is empty")):
        result = heddle(["ask", "-w", str(workspace), *args], daemon_env)
        assert result.returncode == 2 and why in result.stderr, result.stderr


@pytest.mark.parametrize("name, value, why", [
    ("HEDDLE_CONTEXT_WINDOW", "lots", "HEDDLE_CONTEXT_WINDOW must be a whole number, not 'lots'"),
    ("HEDDLE_LOG_LEVEL", "LOUD",
     "HEDDLE_LOG_LEVEL must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL, not 'LOUD'"),
    ("ANTHROPIC_BASE_URL", "notaurl", "ANTHROPIC_BASE_URL is not an http(s) URL: 'notaurl'")])
def test_ask_says_why_the_daemon_cannot_start(daemon_env, workspace, name, value, why):
    env = {**daemon_env, name: value}
    result = heddle(["ask", "-w", str(workspace), "-y", "hello"], env)
    assert result.returncode == 1
    assert f"heddle: Heddle cannot start: {why}" in result.stderr
    assert "Traceback" not in result.stderr


def test_ask_shows_each_settings_warning_once(daemon_env, scripted, workspace):
    scripted.add_scenario("chat", {"steps": [{"content": [{"type": "text", "text": "Hi."}]}]})
    (workspace / ".heddle").mkdir()
    (workspace / ".heddle/settings.toml").write_text(
        '[permissions]\nallow = ["Bash"]\ncolour = "blue"\n')
    result = heddle(["ask", "-w", str(workspace), "-m", "chat", "hello"], daemon_env)
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("heddle: warning")]
    assert len(warnings) == 2 and len(set(warnings)) == 2, result.stderr
    assert any("colour" in line for line in warnings), warnings  # the unknown key
    assert any("is not trusted" in line for line in warnings), warnings


def test_ask_names_the_instruction_files_in_force(daemon_env, scripted, workspace):
    scripted.add_scenario("chat", {"steps": [{"content": [{"type": "text", "text": "Hi."}]}]})
    (workspace / ".git").mkdir()  # the repository root: its file counts for the folder below
    (workspace / "AGENTS.md").write_text("Answer in one line.\n")
    (workspace / "big").mkdir()
    (workspace / "big" / "CLAUDE.md").write_text("x" * 40_000)
    result = heddle(["ask", "-w", str(workspace / "big"), "-m", "chat", "hello"], daemon_env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Hi."
    named = [line for line in result.stderr.splitlines() if "instructions" in line]
    # the deeper file keeps the first 32 KiB; none is left for the one above
    assert named == [f"heddle: instructions: {workspace}/AGENTS.md (cut to fit the cap), "
                     f"{workspace}/big/CLAUDE.md (cut to fit the cap)"], result.stderr


def test_ask_help_names_the_endpoint_variables(daemon_env):
    result = heddle(["ask", "--help"], daemon_env)
    assert result.returncode == 0
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "-y", "--no", "--mode"):
        assert name in result.stdout


def test_ask_without_a_terminal_says_how_to_answer(daemon_env, scripted, workspace):
    scripted.add_scenario("edit", read_grep_edit())
    result = heddle(["ask", "-w", str(workspace), "-m", "edit", "go"], daemon_env)
    assert result.returncode == 0, result.stderr
    hint = [line for line in result.stderr.splitlines() if "needs permission" in line]
    assert hint == ["heddle: Edit app.py needs permission, but stdin is not a terminal to ask "
                    "on, so it was rejected. To answer without asking, run with -y (allow), "
                    "--no (reject), --mode acceptEdits (allow edits) or --mode "
                    "bypassPermissions (allow everything)."]
    assert "'Hello, ' + name" in (workspace / "app.py").read_text()


def test_ask_shows_what_a_daemon_that_died_wrote(daemon_env, workspace):
    dying = f"{sys.executable} -c " + shlex.quote(
        "import sys; sys.stdin.read(1); print('something broke', file=sys.stderr); sys.exit(3)")
    result = heddle(["ask", "-w", str(workspace), "--daemon", dying, "hi"], daemon_env)
    assert result.returncode == 1
    assert result.stderr == ("heddle: the daemon stopped unexpectedly (exit code 3):\n"
                             "  something broke\n")
    missing = heddle(["ask", "-w", str(workspace), "--daemon", "/nonexistent/heddle", "hi"],
                     daemon_env)
    assert missing.returncode == 1
    assert missing.stderr == ("heddle: cannot start the daemon (/nonexistent/heddle): "
                              "No such file or directory\n")


# -- Ctrl-C on a real terminal ------------------------------------------------------------------

AS_SESSION_LEADER = ("import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
                     "os.execv(sys.executable, [sys.executable, '-m', 'heddle', *sys.argv[1:]])")
"""Make stdin (the pty) the controlling terminal, then become `heddle`: a typed Ctrl-C is then
SIGINT for the terminal's foreground process group, as for a user."""


class Terminal:
    """`heddle ask` on a pseudo-terminal of its own."""

    def __init__(self, args: list[str], env: dict[str, str]):
        master, slave = pty.openpty()
        self.proc = subprocess.Popen([sys.executable, "-c", AS_SESSION_LEADER, *args], env=env,
                                     stdin=slave, stdout=slave, stderr=slave,
                                     start_new_session=True)
        os.close(slave)
        self.master = master
        self.seen = b""

    def _read(self, until: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], max(0.0, until - time.monotonic()))
        if not ready:
            return True
        try:
            chunk = os.read(self.master, 4096)
        except OSError:  # EIO: every process holding the terminal has closed it
            chunk = b""
        self.seen += chunk
        return bool(chunk)

    def expect(self, text: bytes, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.seen:
            assert time.monotonic() < deadline and self._read(deadline), \
                f"never saw {text!r} in {self.text()}"

    def type(self, data: bytes) -> None:
        os.write(self.master, data)

    def wait(self, timeout: float = 30) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self._read(deadline):
            pass
        return self.proc.wait(max(0.1, deadline - time.monotonic()))

    def daemon_pid(self) -> int:
        (pid,) = [int(c) for task in Path(f"/proc/{self.proc.pid}/task").iterdir()
                  for c in (task / "children").read_text().split()]
        return pid

    def text(self) -> str:
        return self.seen.decode(errors="replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        os.close(self.master)


def ctrl_c_then_exit(term: Terminal) -> tuple[int, float]:
    started = time.monotonic()
    term.type(b"\x03")
    code = term.wait()
    return code, time.monotonic() - started


def assert_clean(term: Terminal) -> None:
    assert "Traceback" not in term.text() and "KeyboardInterrupt" not in term.text()
    assert "-32800" not in term.text()


def test_ctrl_c_at_a_permission_prompt_cancels_the_turn(daemon_env, scripted, workspace):
    scripted.add_scenario("p", {"steps": [
        {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": "touch ran"}}]},
        {"content": [{"type": "text", "text": "Never sent."}]}]})
    term = Terminal(["ask", "-w", str(workspace), "-m", "p", "go"], daemon_env)
    try:
        term.expect(b"[n] reject > ")
        daemon = term.daemon_pid()
        code, took = ctrl_c_then_exit(term)  # and no Enter: it must not wait for one
    finally:
        term.close()
    print(f"exit {code} {took:.2f} s after Ctrl-C at the prompt")
    assert code == 130, term.text()
    assert "[cancelled during tools" in term.text()
    assert_clean(term)
    assert not (workspace / "ran").exists()
    assert wait_dead([daemon], time.monotonic() + 10) == []
    log = Path(daemon_env["HEDDLE_LOG_FILE"]).read_text()
    assert "(turn/cancel)" in log and "SIGINT" not in log  # the Ctrl-C reached heddle ask only


def one_command(scripted, command: str, **more) -> None:
    """Scenario "t": a Bash call of `command`, then an answer a cancelled turn never gets."""
    scripted.add_scenario("t", {"steps": [
        {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": command,
                                                                     **more}}]},
        {"content": [{"type": "text", "text": "Never sent."}]}]})


def test_ctrl_c_while_a_command_runs_kills_it(daemon_env, scripted, workspace):
    command = "sleep 300 & echo $! > child.pid; echo $$ > shell.pid; wait"
    one_command(scripted, command)
    term = Terminal(["ask", "-w", str(workspace), "-m", "t", "-y", "go"], daemon_env)
    try:
        pids = [int(wait_for_text(workspace / f"{name}.pid")) for name in ("shell", "child")]
        assert all(alive(p) for p in pids)
        daemon = term.daemon_pid()
        code, took = ctrl_c_then_exit(term)
    finally:
        term.close()
    print(f"exit {code} {took:.2f} s after Ctrl-C during a command")
    assert code == 130, term.text()
    assert "✗ cancelled" in term.text() and "[cancelled during tools" in term.text()
    assert_clean(term)
    assert wait_dead(pids + [daemon], time.monotonic() + 10) == []


def test_a_second_ctrl_c_quits_at_once(daemon_env, scripted, workspace):
    # the command ignores SIGTERM, so the cancel waits its kill grace: time for a second Ctrl-C
    command = "trap '' TERM; sleep 300 & echo $! > child.pid; echo $$ > shell.pid; wait"
    one_command(scripted, command)
    term = Terminal(["ask", "-w", str(workspace), "-m", "t", "-y", "go"], daemon_env)
    try:
        pids = [int(wait_for_text(workspace / f"{name}.pid")) for name in ("shell", "child")]
        daemon = term.daemon_pid()
        term.type(b"\x03")
        term.expect(b"Ctrl-C again to quit at once")
        code, took = ctrl_c_then_exit(term)
    finally:
        term.close()
    print(f"exit {code} {took:.2f} s after the second Ctrl-C")
    assert code == 130, term.text()
    assert "heddle: quit" in term.text()
    assert "[cancelled" not in term.text()  # it did not wait for the turn to end
    assert_clean(term)
    assert wait_dead(pids + [daemon], time.monotonic() + 10) == []


def wait_for_text(path: Path, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while not path.exists() or not path.read_text().strip():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)
    return path.read_text().strip()


def test_always_allow_in_ask_holds_in_ask_continue(daemon_env, scripted, workspace):
    echo = {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": "echo hi"}}]}
    done = {"content": [{"type": "text", "text": "Done."}]}
    scripted.add_scenario("echo", {"steps": [echo, done, echo, done]})
    term = Terminal(["ask", "-w", str(workspace), "-m", "echo", "say hi"], daemon_env)
    try:
        term.expect(b"[n] reject > ")
        term.type(b"a\n")
        assert term.wait() == 0, term.text()
    finally:
        term.close()

    again = heddle(["ask", "-w", str(workspace), "-c", "once more"], daemon_env)  # no tty
    assert again.returncode == 0, again.stderr
    assert "? Allow" not in again.stdout
    result = scripted.requests_for("echo")[3].body["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and not result.get("is_error"), result
    assert "hi" in result["content"]


# -- live command output --------------------------------------------------------------------

def test_ask_without_a_terminal_prints_command_output_plainly(daemon_env, scripted, workspace):
    one_command(scripted, "echo one; printf 'two\\x1b[31m\\n' >&2; printf 'no newline'; exit 3",
                description="Print three lines")
    result = heddle(["ask", "-w", str(workspace), "-m", "t", "-y", "go"], daemon_env)
    assert result.returncode == 0, result.stderr
    assert ("  │ one\n  │ two\n  │ no newline\n  ✗ error: exit 3\n") in result.stdout
    # the description is the call's title; what is allowed is the command
    assert "● Print three lines\n  allowed (--yes): Run: echo one;" in result.stdout
    assert "\x1b" not in result.stdout


def test_ask_on_a_terminal_shows_output_live_and_a_failure_in_red(daemon_env, scripted,
                                                                    workspace):
    one_command(scripted, "echo live-line; for i in $(seq 1500); do [ -e release ] && break; "
                "sleep 0.02; done; echo last-line; exit 3")
    term = Terminal(["ask", "-w", str(workspace), "-m", "t", "-y", "go"], daemon_env)
    try:
        term.expect("\x1b[2m  │ live-line".encode())  # dimmed, while the command waits
        assert "error: exit 3" not in term.text()
        (workspace / "release").touch()
        term.expect("\x1b[31m  ✗ error: exit 3".encode())  # in red
        assert term.wait() == 0
    finally:
        term.close()
    # the failure's last lines stay on the screen, redrawn in place
    assert "\x1b[2m  │ last-line" in term.text()
    assert_clean(term)


# -- what reaches the terminal ------------------------------------------------------------------

INJECTED = "\x1b]0;TITLE\x07\x1b[2J"
"""Sets the window title and clears the screen, if a terminal gets it."""


def test_escapes_in_the_answer_and_a_write_never_reach_the_terminal(daemon_env, scripted,
                                                                       workspace):
    scripted.add_scenario("esc", {"steps": [
        {"content": [{"type": "text", "text": f"Writing {INJECTED}now."},
                     {"type": "tool_use", "name": "Write", "input": {
                         "path": "notes.txt", "content": "harmless\n\x1b[1A\x1b[2Kevil\n"}}]},
        {"content": [{"type": "text", "text": f"Done {INJECTED}."}]}]})
    result = heddle(["ask", "-w", str(workspace), "-m", "esc", "-y", "go"], daemon_env)
    assert result.returncode == 0, result.stderr
    assert "allowed (--yes): Write notes.txt" in result.stdout
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout, repr(result.stdout)
    assert "\x1b" not in result.stderr, repr(result.stderr)
    assert "+\\x1b[1A\\x1b[2Kevil" in result.stdout  # the diff shows what the file gets
    assert "Done \\x1b]0;TITLE\\x07\\x1b[2J." in result.stdout
    assert (workspace / "notes.txt").read_text() == "harmless\n\x1b[1A\x1b[2Kevil\n"


def test_ask_refuses_a_workspace_path_that_is_not_utf8(daemon_env, tmp_path):
    folder = tmp_path / os.fsdecode(b"ws\xffbad")  # the OS allows any bytes but / and NUL
    folder.mkdir()
    for args, cwd in ((["-w", str(folder)], None), ([], folder)):
        result = heddle(["ask", *args, "-m", "hello", "hi"], daemon_env, cwd=cwd)
        assert result.returncode == 2, result.stderr
        assert result.stderr == (f"heddle: the workspace path {tmp_path}/ws\\xffbad is not "
                                 "valid UTF-8, so it cannot be sent to the daemon\n")


def test_ask_stops_quietly_when_nobody_reads_its_output(daemon_env, scripted, workspace):
    # the command waits after its first line until the reader has gone, then prints a lot
    one_command(scripted, "echo first; for i in $(seq 600); do [ -e gone ] && break; "
                "sleep 0.05; done; seq 1 3000")
    proc = subprocess.Popen([HEDDLE, "ask", "-w", str(workspace), "-m", "t", "-y", "go"],
                            env=daemon_env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        while "first" not in proc.stdout.readline():  # as `| head -1` would, once it has it
            assert proc.poll() is None
        proc.stdout.close()
        (workspace / "gone").touch()
        stderr = proc.communicate(timeout=30)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 141, stderr
    assert stderr == "", stderr  # not "the daemon stopped unexpectedly", no traceback
    log = Path(daemon_env["HEDDLE_LOG_FILE"]).read_text()
    assert "(turn/cancel)" in log  # the turn was ended, not left to run


def test_ask_with_stdout_closed_says_so(daemon_env, workspace):
    result = subprocess.run(f"{shlex.quote(HEDDLE)} ask -w {shlex.quote(str(workspace))} hi >&-",
                            shell=True, env=daemon_env, capture_output=True, text=True,
                            timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 1
    assert result.stderr == "heddle: stdout is closed, so there is nowhere to show the answer\n"


def test_ask_into_a_pipe_names_the_call_of_a_result_away_from_its_title(daemon_env, scripted,
                                                                         workspace):
    (workspace / "one.txt").write_text("1\n")
    (workspace / "two.txt").write_text("1\n2\n")
    read = [{"type": "tool_use", "name": "Read", "input": {"path": name}}
            for name in ("one.txt", "two.txt")]
    scripted.add_scenario("side", {"steps": [
        {"content": read},  # read-only calls run side by side
        {"content": [{"type": "tool_use", "name": "Write",
                      "input": {"path": "odd\nname.txt", "content": "x\n"}}]},
        {"content": [{"type": "text", "text": "Done."}]}]})
    result = heddle(["ask", "-w", str(workspace), "-m", "side", "-y", "go"], daemon_env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    results = [n for n, line in enumerate(lines) if line.startswith("  └")]
    assert len(results) == 3, result.stdout
    for name, count in (("one.txt", "1 line"), ("two.txt", "2 lines")):
        (n,) = [n for n in results[:2] if lines[n].endswith(f" {count}")]
        assert lines[n - 1] == f"● Read {name}" or \
            lines[n] == f"  └ Read {name}: {count}", result.stdout
    assert "● Write odd\\nname.txt" in lines, result.stdout  # one line, the newline shown
    assert (workspace / "odd\nname.txt").read_text() == "x\n"
    assert "[completed · 3 model calls ·" in result.stderr


def test_ask_and_trust_call_a_workspace_that_is_not_a_folder_a_wrong_command_line(daemon_env,
                                                                                  tmp_path):
    (tmp_path / "file").write_text("")
    for path in (tmp_path / "missing", tmp_path / "file"):
        for command in (["ask", "-w", str(path), "hi"], ["trust", "-w", str(path)]):
            result = heddle(command, daemon_env)
            assert result.returncode == 2, (command, result.stderr)
            assert result.stderr == f"heddle: {path} is not a folder\n"


def test_ask_with_a_base_url_needs_no_api_key(daemon_env, scripted, workspace):
    scripted.add_scenario("chat", {"steps": [{"content": [{"type": "text", "text": "Hi."}]}] * 2})
    unset = {k: v for k, v in daemon_env.items() if k != "ANTHROPIC_API_KEY"}
    for env in (unset, {**daemon_env, "ANTHROPIC_API_KEY": ""}):
        result = heddle(["ask", "-w", str(workspace), "-m", "chat", "hello"], env)
        assert result.returncode == 0, result.stderr
        assert "Hi." in result.stdout


def test_ask_shows_the_thinking_on_stderr_and_only_the_answer_on_stdout(daemon_env, scripted,
                                                                        workspace):
    model = "claude-opus-4-7"  # thinks by default
    scripted.add_scenario(model, {"apiModel": model, "steps": [{"content": [
        {"type": "thinking", "thinking": "The user says hi.", "signature": "s1"},
        {"type": "text", "text": "Hello!"}]}]})
    result = heddle(["ask", "-w", str(workspace), "-m", model, "hi"], daemon_env)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Hello!\n"
    assert "✻ thinking\nThe user says hi.\n" in result.stderr  # no terminal: not dimmed
    assert scripted.requests_for(model)[0].body["thinking"] == {"type": "adaptive",
                                                                   "display": "summarized"}
