"""Plan mode the model knows about, through the daemon and the scripted model: the note in the
user message, read-only commands, the PresentPlan tool approved or rejected, and the note when
the user leaves plan mode."""

from __future__ import annotations

import subprocess

import pytest

from e2e import lsp
from e2e.test_cli import HEDDLE, Terminal

DONE = {"content": [{"type": "text", "text": "Done."}]}
PLAN = "# Rename greet\n\n1. Edit app.py\n2. Run the tests"
TURN = 90
"""Seconds a turn may take: a bound for a busy machine, far above the usual second or two."""


def tool(name: str, **inp) -> dict:
    return {"type": "tool_use", "name": name, "input": inp}


def steps(*rounds: list[dict]) -> dict:
    return {"steps": [{"content": calls} for calls in rounds] + [DONE]}


@pytest.fixture
async def client(daemon_env, daemon_command, tmp_path):
    c = await lsp.start(dict(daemon_env, XDG_CONFIG_HOME=str(tmp_path / "config")),
                        daemon_command)
    yield c
    await lsp.stop(c)


async def new_session(client, workspace, model: str, **extra) -> str:
    result = await client.call("session/new", {"workspace": str(workspace), "model": model,
                                               **extra}, timeout=TURN)
    return result["sessionId"]


def heddle(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """`heddle ask` without a terminal."""
    return subprocess.run([HEDDLE, *args], env=env, capture_output=True, text=True,
                          timeout=TURN, stdin=subprocess.DEVNULL)


BRIEFING = ("<environment", "<instructions")
"""How the blocks of a session's briefing start (docs/instructions.md): not what these tests
look at."""


def user_texts(request) -> list[str]:
    """The text blocks of the request's last user message, but the session's briefing."""
    content = request.body["messages"][-1]["content"]
    return [b["text"] for b in content
            if b["type"] == "text" and not b["text"].startswith(BRIEFING)]


def results(request) -> list[dict]:
    return [b for b in request.body["messages"][-1]["content"] if b["type"] == "tool_result"]


def text_of(result: dict) -> str:
    content = result["content"]
    return content if isinstance(content, str) else "".join(b["text"] for b in content)


async def test_the_request_says_the_session_plans_and_keeps_the_cached_prefix(
        client, scripted, workspace):
    scripted.add_scenario("plain", {"steps": [DONE]})
    scripted.add_scenario("planning", {"steps": [DONE, DONE]})
    plain = await new_session(client, workspace, "plain")
    planning = await new_session(client, workspace, "planning", permissionMode="plan")

    await client.call("turn/start", {"sessionId": plain, "prompt": "hello"}, timeout=TURN)
    await client.call("turn/start", {"sessionId": planning, "prompt": "hello"}, timeout=TURN)
    await client.call("turn/start", {"sessionId": planning, "prompt": "and then?"}, timeout=TURN)

    default, first, second = (scripted.requests_for("plain")[0],
                              *scripted.requests_for("planning"))
    assert user_texts(default) == ["hello"]
    note, prompt = user_texts(first)
    assert note.startswith("[Plan mode] ") and "PresentPlan" in note and prompt == "hello"
    assert user_texts(second)[0].startswith("[Plan mode] ")  # every turn in plan mode
    assert user_texts(second)[1] == "and then?"
    # the mode changes nothing before the conversation: same system prompt, same tools
    assert first.body["system"] == default.body["system"]
    assert first.body["tools"] == default.body["tools"]
    assert "PresentPlan" in [t["name"] for t in default.body["tools"]]


async def test_read_only_commands_run_in_plan_mode_and_others_are_refused(
        client, scripted, workspace):
    subprocess.run(["git", "init", "-q"], cwd=workspace, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                    "--allow-empty", "-m", "first commit"], cwd=workspace, check=True)
    scripted.add_scenario("bash", steps([
        tool("Bash", command="git log --format=%s"),
        tool("Bash", command="echo x > f"),
        tool("Bash", command="ls; rm app.py"),
        tool("Bash", command="cat app.py | wc -l")]))
    sid = await new_session(client, workspace, "bash", permissionMode="plan")

    done = await client.call("turn/start", {"sessionId": sid, "prompt": "look around"},
                             timeout=TURN)

    assert done["reason"] == "completed"
    assert client.permission_requests == []  # nothing asked: read-only runs, the rest refused
    log, redirect, chained, piped = results(scripted.requests_for("bash")[-1])
    assert "first commit" in text_of(log) and not log.get("is_error")
    assert text_of(redirect).startswith(
        "This command is not available in plan mode: it has a redirection to or from a file "
        "(> f).")
    assert text_of(chained).startswith(
        "This command is not available in plan mode: rm is not on the list of read-only "
        "commands.")
    assert redirect["is_error"] and chained["is_error"]
    assert "5" in text_of(piped)
    assert not (workspace / "f").exists() and (workspace / "app.py").exists()


@pytest.mark.parametrize("armed", [
    ("config", "[core]\n\tfsmonitor = \"touch {marker}; false\"\n", "core.fsmonitor"),
    ("config", "[Diff \"x\"]\n\ttextconv = touch {marker}\n", "diff.x.textconv"),
    ("config", "[include]\n\tpath = {marker}\n", "include.path"),
    ("hooks/post-index-change", "#!/bin/sh\ntouch {marker}\n", "post-index-change hook"),
], ids=["fsmonitor", "textconv", "include", "hook"])
async def test_git_does_not_run_unasked_in_a_repository_whose_config_names_a_program(
        client, scripted, workspace, tmp_path, armed):
    """A repository's own .git/config is workspace content: a key that makes git run a
    program keeps git from running in plan mode (the program would run unasked)."""
    subprocess.run(["git", "init", "-q"], cwd=workspace, check=True)
    name, text, said = armed
    marker = tmp_path / "ran"
    target = workspace / ".git" / name
    target.parent.mkdir(exist_ok=True)
    with target.open("a") as f:
        f.write(text.format(marker=marker))
    target.chmod(0o755)
    scripted.add_scenario("armed", steps([
        tool("Bash", command="git status"),
        tool("Bash", command="cd sub && git log"),
        tool("Bash", command="ls")]))
    sid = await new_session(client, workspace, "armed", permissionMode="plan")

    done = await client.call("turn/start", {"sessionId": sid, "prompt": "look"}, timeout=TURN)

    assert done["reason"] == "completed" and client.permission_requests == []
    status, after_cd, listing = results(scripted.requests_for("armed")[-1])
    assert status["is_error"] and text_of(status).startswith(
        "This command is not available in plan mode: git does not run unasked in this "
        "repository: ")
    assert said in text_of(status)
    assert after_cd["is_error"] and "git runs after a cd here" in text_of(after_cd)
    assert "app.py" in text_of(listing) and not listing.get("is_error")
    assert not marker.exists()


async def test_an_approved_plan_switches_the_mode_and_the_model_is_told(
        client, scripted, workspace):
    scripted.add_scenario("approve", steps(
        [tool("PresentPlan", plan=PLAN)],
        [tool("Write", path="new.txt", content="x")]))
    scripted.add_scenario("approve-next", {"steps": [DONE]})
    client.answer = lambda p: {"decision": "allowOnce", "mode": "acceptEdits"}
    sid = await new_session(client, workspace, "approve", permissionMode="plan")

    done = await client.call("turn/start", {"sessionId": sid, "prompt": "plan it"}, timeout=TURN)

    assert done["reason"] == "completed"
    [asked] = client.permission_requests  # the plan; the Write after it ran in acceptEdits
    assert asked["tool"] == "PresentPlan" and asked["title"] == "Plan: Rename greet"
    assert asked["preview"] == {"kind": "plan", "plan": PLAN}
    assert [(o["decision"], o.get("mode")) for o in asked["options"]] == [
        ("allowOnce", "default"), ("allowOnce", "acceptEdits"), ("reject", None)]
    kinds = [e["kind"] for e in client.turn_events()]
    assert kinds.index("modeChanged") > kinds.index("permissionAnswered")
    assert client.turn_events("modeChanged") == [{"kind": "modeChanged", "mode": "acceptEdits"}]
    requests = scripted.requests_for("approve")
    [approved] = results(requests[1])
    assert text_of(approved).startswith(
        "The user approved the plan. Plan mode has ended; the session is now in mode "
        "acceptEdits")
    assert (workspace / "new.txt").read_text() == "x"
    # the next turn runs in the new mode, with no note about plan mode
    configured = await client.call("session/configure", {"sessionId": sid,
                                                         "model": "approve-next"})
    assert configured["permissionMode"] == "acceptEdits"
    await client.call("turn/start", {"sessionId": sid, "prompt": "thanks"}, timeout=TURN)
    assert user_texts(scripted.requests_for("approve-next")[0]) == ["thanks"]


async def test_a_rejected_plan_keeps_planning_with_the_feedback(client, scripted, workspace):
    scripted.add_scenario("reject", steps(
        [tool("PresentPlan", plan=PLAN)], [tool("Write", path="new.txt", content="x")]))
    client.answer = lambda p: {"decision": "reject", "message": "also update the README"}
    sid = await new_session(client, workspace, "reject", permissionMode="plan")

    await client.call("turn/start", {"sessionId": sid, "prompt": "plan it"}, timeout=TURN)

    requests = scripted.requests_for("reject")
    [rejected] = results(requests[1])
    assert rejected["is_error"]
    assert text_of(rejected) == (
        "The user did not approve the plan and said: also update the README. You are still in "
        "plan mode: work the feedback in (read more if you need to), then call PresentPlan "
        "again with the revised plan, or ask the user if it is unclear what they want.")
    [write] = results(requests[2])
    assert text_of(write).startswith("Write is not available in plan mode")
    assert client.turn_events("modeChanged") == []
    assert not (workspace / "new.txt").exists()


async def test_leaving_plan_mode_is_told_once_at_the_next_turn(client, scripted, workspace):
    scripted.add_scenario("leave", {"steps": [DONE, DONE, DONE]})
    sid = await new_session(client, workspace, "leave", permissionMode="plan")
    await client.call("turn/start", {"sessionId": sid, "prompt": "first"}, timeout=TURN)

    await client.call("session/configure", {"sessionId": sid, "permissionMode": "default"})
    await client.call("turn/start", {"sessionId": sid, "prompt": "second"}, timeout=TURN)
    await client.call("turn/start", {"sessionId": sid, "prompt": "third"}, timeout=TURN)

    first, second, third = scripted.requests_for("leave")
    # the notes change no cached prefix: what the first request cached is read back
    assert second.cache.read_tokens >= first.cache.creation_tokens + first.cache.read_tokens > 0
    assert user_texts(second) == [
        "[Plan mode ended] The user switched the session to mode default: you may now edit "
        "files and run commands; each edit or command asks the user first unless a rule allows "
        "it. PresentPlan is no longer needed.", "second"]
    assert user_texts(third) == ["third"]


async def test_present_plan_outside_plan_mode_is_refused_with_what_to_do(
        client, scripted, workspace):
    scripted.add_scenario("outside", steps([tool("PresentPlan", plan=PLAN)]))
    sid = await new_session(client, workspace, "outside")

    await client.call("turn/start", {"sessionId": sid, "prompt": "go"}, timeout=TURN)

    [refused] = results(scripted.requests_for("outside")[-1])
    assert refused["is_error"] and client.permission_requests == []
    assert text_of(refused) == (
        "PresentPlan only works in plan mode, and this session is in mode default: there is no "
        "plan to approve. Go ahead with the work as the mode allows (or ask the user in your "
        "answer if you want their view first).")


async def test_a_plan_answered_without_a_mode_goes_on_in_default(client, scripted, workspace):
    scripted.add_scenario("nomode", steps([tool("PresentPlan", plan=PLAN)],
                                          [tool("Write", path="new.txt", content="x")]))
    answers = iter([{"decision": "allowOnce"}, {"decision": "reject"}])
    client.answer = lambda p: next(answers)
    sid = await new_session(client, workspace, "nomode", permissionMode="plan")

    await client.call("turn/start", {"sessionId": sid, "prompt": "plan it"}, timeout=TURN)

    assert client.turn_events("modeChanged") == [{"kind": "modeChanged", "mode": "default"}]
    assert [r["tool"] for r in client.permission_requests] == ["PresentPlan", "Write"]


# -- heddle ask ---------------------------------------------------------------------------------

@pytest.fixture
def terminals():
    """`heddle ask` on pseudo-terminals, each killed and closed after the test."""
    opened: list[Terminal] = []

    def start(args: list[str], env: dict[str, str]) -> Terminal:
        opened.append(Terminal(args, env))
        return opened[-1]
    yield start
    for term in opened:
        term.close()


def test_heddle_ask_shows_the_plan_and_approves_it_in_the_mode_typed(daemon_env, scripted,
                                                                      workspace, terminals):
    scripted.add_scenario("ask-plan", steps([tool("PresentPlan", plan=PLAN)],
                                            [tool("Write", path="new.txt", content="x")]))
    term = terminals(["ask", "-w", str(workspace), "-m", "ask-plan", "--mode", "plan", "go"],
                    daemon_env)
    term.expect(b"[y] approve  [e] approve, accept edits  [n] keep planning > ", TURN)
    term.type(b"e\n")

    assert term.wait(TURN) == 0, term.text()
    shown = term.text()
    assert "? Approve the plan: Plan: Rename greet" in shown
    assert "    1. Edit app.py" in shown  # the plan itself, indented
    assert "plan approved: mode acceptEdits from now on" in shown
    assert "? Allow" not in shown  # the Write after it ran in acceptEdits, unasked
    assert (workspace / "new.txt").read_text() == "x"


def test_heddle_ask_keeps_planning_with_what_the_user_typed(daemon_env, scripted, workspace,
                                                           terminals):
    scripted.add_scenario("ask-replan", steps([tool("PresentPlan", plan=PLAN)]))
    term = terminals(["ask", "-w", str(workspace), "-m", "ask-replan", "--mode", "plan", "go"],
                    daemon_env)
    term.expect(b"[n] keep planning > ", TURN)
    term.type(b"n\n")
    term.expect(b"what should change? (optional) > ", TURN)
    term.type(b"test it first\n")

    assert term.wait(TURN) == 0, term.text()
    [result] = results(scripted.requests_for("ask-replan")[-1])
    assert text_of(result).startswith("The user did not approve the plan and said: test it "
                                      "first.")


def test_heddle_ask_without_a_terminal_prints_the_plan_and_approves_it_only_with_yes(
        daemon_env, scripted, workspace):
    scripted.add_scenario("pipe-plan", steps([tool("PresentPlan", plan=PLAN)]))
    unasked = heddle(["ask", "-w", str(workspace), "-m", "pipe-plan", "--mode", "plan", "go"],
                     daemon_env)
    assert unasked.returncode == 0, unasked.stderr
    assert "  not approved (no terminal to ask on): Plan: Rename greet" in unasked.stdout
    assert "    2. Run the tests" in unasked.stdout
    [result] = results(scripted.requests_for("pipe-plan")[-1])
    assert text_of(result).startswith("The user did not approve the plan and said: Nobody can "
                                      "approve a plan in this run (no terminal)")

    scripted.add_scenario("yes-plan", steps([tool("PresentPlan", plan=PLAN)],
                                            [tool("Write", path="new.txt", content="x")]))
    approved = heddle(["ask", "-w", str(workspace), "-m", "yes-plan", "--mode", "plan", "-y",
                       "go"], daemon_env)
    assert approved.returncode == 0, approved.stderr
    assert "  approved (--yes), mode default: Plan: Rename greet" in approved.stdout
    assert "plan approved: mode default from now on" in approved.stdout
    assert (workspace / "new.txt").read_text() == "x"  # -y allowed the Write in mode default


async def test_a_loaded_session_goes_on_in_the_mode_its_plan_was_approved_in(
        daemon_env, daemon_command, scripted, workspace, tmp_path):
    scripted.add_scenario("kept", steps([tool("PresentPlan", plan=PLAN)]))
    env = dict(daemon_env, XDG_CONFIG_HOME=str(tmp_path / "config"))
    first = await lsp.start(env, daemon_command)
    try:
        first.answer = lambda p: {"decision": "allowOnce", "mode": "acceptEdits"}
        sid = await new_session(first, workspace, "kept", permissionMode="plan")
        await first.call("turn/start", {"sessionId": sid, "prompt": "plan it"}, timeout=TURN)
    finally:
        await lsp.stop(first)
    second = await lsp.start(env, daemon_command)
    try:
        loaded = await second.call("session/load", {"sessionId": sid}, timeout=TURN)
    finally:
        await lsp.stop(second)
    assert loaded["permissionMode"] == "acceptEdits"
