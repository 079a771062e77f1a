"""Sessions that survive: transcripts, list, load, resume, crash repair, concurrency."""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from pathlib import Path

import pytest

from heddle.client import RpcError
from e2e import lsp
from e2e.crashable import SLEEPER, after, file_appears, reap_sleeper, transcript_path
from e2e.test_turns import new_session, read_grep_edit

SLOW = {"content": [{"type": "text", "text": "Streaming words " * 60}], "chunk": 4, "delayMs": 15}
BASH = {"content": [{"type": "text", "text": "Running it."},
                    {"type": "tool_use", "name": "Bash", "input": {"command": SLEEPER}}]}
EDIT = {"content": [{"type": "tool_use", "name": "Edit", "input": {
    "path": "app.py", "old_string": "'Hello, ' + name", "new_string": "'Hi, ' + name"}}]}
DONE = {"content": [{"type": "text", "text": "Continued."}]}


async def test_list_load_replay_and_resume(daemons, scripted, workspace, daemon_env):
    scripted.add_scenario("edit", {"steps": read_grep_edit()["steps"] + [DONE]})
    first = await daemons()
    sid = (await first.call("session/new", {"workspace": str(workspace), "model": "edit"}))["sessionId"]
    result = await first.call("turn/start", {"sessionId": sid, "prompt": "Use an f-string please"})
    assert result["reason"] == "completed"
    await first.stop()

    second = await daemons()
    listed = (await second.call("session/list", {"workspace": str(workspace)}))["sessions"]
    assert [(s["sessionId"], s["title"], s["turns"], s["lastReason"], s["live"]) for s in listed] == [
        (sid, "Use an f-string please", 1, "completed", False)]
    loaded = await second.call("session/load", {"sessionId": sid})
    assert (loaded["turns"], loaded.get("warnings", []), loaded["model"]) == (1, [], "edit")
    replayed = second.kinds()
    assert replayed[0] == "turnStarted" and replayed[-1] == "turnEnded"
    assert replayed.count("toolCallFinished") == 3
    assert [e["seq"] for e in second.events] == list(range(len(second.events)))
    replayed = list(second.events)
    assert (await second.call("session/load", {"sessionId": sid}))["turns"] == 1  # live now
    assert second.events == replayed + replayed
    again = await second.call("turn/start", {"sessionId": sid, "prompt": "thanks"})
    assert again["reason"] == "completed"
    sent = scripted.requests_for("edit")[-1].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user", "assistant", "user",
                                         "assistant", "user"]
    assert sent[-1]["content"][-1]["text"] == "thanks"
    assert (await second.call("session/list", {}))["sessions"][0]["live"] is True


async def kill_during(daemons, scripted, workspace, daemon_env, step: dict, trigger: str,
                      delay: float, *, mode: str = "default") -> tuple[str, dict]:
    """Run a turn, SIGKILL the daemon at `trigger` + `delay`, then load and continue.

    `trigger`: "permission" (a prompt is open), "sleeper" (SLEEPER's pid file is written: the
    Bash call runs), or the kind of the first event to wait for."""
    name = f"s{random.randrange(1 << 30)}"
    scripted.add_scenario(name, {"steps": [step, DONE]})
    d = await daemons()
    if trigger == "permission":
        d.answer = asyncio.get_running_loop().create_future()  # never answered
    sid = (await d.call("session/new", {"workspace": str(workspace), "model": name,
                                        "permissionMode": mode}))["sessionId"]
    turn = asyncio.ensure_future(d.conn.request("turn/start", {"sessionId": sid, "prompt": "go"}))
    try:
        if trigger == "permission":
            await asyncio.wait_for(d.permission_asked.wait(), 15)
        elif trigger == "sleeper":
            await file_appears(workspace / "sleeper.pid")
        else:
            await d.wait_for(trigger)
        await asyncio.sleep(delay)
        shown = "".join(e["event"].get("text", "") for e in d.events
                        if e["event"]["kind"] == "textDelta")
        await d.kill()
    finally:
        reap_sleeper(workspace)
    with pytest.raises(ConnectionError):
        await turn

    after = await daemons()
    loaded = await after.call("session/load", {"sessionId": sid})
    result = await after.call("turn/start", {"sessionId": sid, "prompt": "continue"})
    assert result["reason"] == "completed", result
    sent = scripted.requests_for(name)[-1]
    assert sent.status == 200
    return shown, {"loaded": loaded, "messages": sent.body["messages"]}


async def test_crash_while_streaming_keeps_what_was_shown(daemons, scripted, workspace, daemon_env):
    shown, got = await kill_during(daemons, scripted, workspace, daemon_env, SLOW, "textDelta", 0.3)
    messages = got["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    kept = messages[1]["content"][0]["text"]
    assert shown and kept.startswith(shown)  # everything the editor showed is still there
    assert "interrupted" in messages[2]["content"][0]["text"]
    assert got["loaded"].get("warnings", [])


async def test_crash_during_a_tool_gets_an_interrupted_result(daemons, scripted, workspace,
                                                                daemon_env):
    _, got = await kill_during(daemons, scripted, workspace, daemon_env, BASH, "sleeper", 0.0,
                               mode="bypassPermissions")
    messages = got["messages"]
    result = messages[2]["content"][0]
    assert result["type"] == "tool_result" and result["is_error"] is True
    assert "interrupted" in result["content"]
    assert any("tool call" in w for w in got["loaded"].get("warnings", []))


async def test_crash_while_permission_is_pending(daemons, scripted, workspace, daemon_env):
    _, got = await kill_during(daemons, scripted, workspace, daemon_env, EDIT, "permission", 0.0)
    assert "'Hello, ' + name" in (workspace / "app.py").read_text()
    assert got["messages"][2]["content"][0]["is_error"] is True


@pytest.mark.parametrize("point", range(4))
async def test_random_kill_points(daemons, scripted, workspace, daemon_env, point):
    """One of four random kill points (per run) in a turn that streams, reads and runs Bash;
    one per test, so each test starts only two daemons."""
    rand = random.Random(os.getpid())  # the same four points for the four tests of a run
    delay = [rand.uniform(0.0, 1.0) for _ in range(4)][point]
    step = {"content": [{"type": "text", "text": "Let me check. " * 10},
                        {"type": "tool_use", "name": "Read", "input": {"path": "app.py"}},
                        {"type": "tool_use", "name": "Bash", "input": {"command": "sleep 2"}}],
            "chunk": 5, "delayMs": 10}
    print(f"killed {delay:.2f} s after the model call started")
    # kill_during checks the session loads and its turn continues with a valid request
    await kill_during(daemons, scripted, workspace, daemon_env, step, "modelCall", delay,
                      mode="bypassPermissions")


async def test_concurrent_sessions_do_not_mix(client, scripted, workspace, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    scripted.add_scenario("a", {"steps": [{"content": [{"type": "text", "text": "A " * 100}],
                                           "chunk": 3, "delayMs": 5}]})
    scripted.add_scenario("b", {"steps": [{"content": [{"type": "text", "text": "B " * 100}],
                                           "chunk": 3, "delayMs": 5}]})
    sa = await new_session(client, workspace, "a")
    sb = await new_session(client, other, "b")
    ra, rb = await asyncio.gather(
        client.call("turn/start", {"sessionId": sa, "prompt": "prompt a"}),
        client.call("turn/start", {"sessionId": sb, "prompt": "prompt b"}))
    assert ra["text"] == "A " * 100 and rb["text"] == "B " * 100
    for sid, letter in ((sa, "A"), (sb, "B")):
        text = "".join(e["event"]["text"] for e in client.events
                       if e["sessionId"] == sid and e["event"]["kind"] == "textDelta")
        assert text == letter + " " + (letter + " ") * 99
    assert scripted.requests_for("a")[0].body["messages"][0]["content"][-1]["text"] == "prompt a"
    assert scripted.requests_for("b")[0].body["messages"][0]["content"][-1]["text"] == "prompt b"


async def test_truncated_corrupt_and_future_transcripts(daemons, scripted, workspace, daemon_env):
    scripted.add_scenario("s", {"steps": [DONE, DONE, DONE]})
    d = await daemons()
    sid = (await d.call("session/new", {"workspace": str(workspace), "model": "s"}))["sessionId"]
    await d.call("turn/start", {"sessionId": sid, "prompt": "hello"})
    await d.stop()
    path = transcript_path(daemon_env, sid)
    with open(path, "ab") as f:
        f.write(b'{"type": "message", "turnId": "x", "mess')  # a write cut off by a crash
    folder = path.parent
    (folder / ("0" * 32 + ".jsonl")).write_text("not a transcript\n")
    future = "f" * 32
    (folder / f"{future}.jsonl").write_text(json.dumps({
        "type": "header", "version": 99, "sessionId": future, "workspace": str(workspace),
        "model": "s", "createdAt": 0}) + "\n")

    d2 = await daemons()
    listed = [s["sessionId"] for s in (await d2.call("session/list"))["sessions"]]
    assert listed == [sid]
    loaded = await d2.call("session/load", {"sessionId": sid})
    assert loaded.get("warnings", []) == [f"skipped the last line of {sid}.jsonl: it is not a complete record"]
    assert (await d2.call("turn/start", {"sessionId": sid, "prompt": "again"}))["reason"] == "completed"
    await d2.stop()
    d3 = await daemons()  # the cut line was dropped, so the next turn's records are whole
    reloaded = await d3.call("session/load", {"sessionId": sid})
    assert (reloaded["turns"], reloaded.get("warnings", [])) == (2, [])
    assert [e["event"]["prompt"] for e in d3.events if e["event"]["kind"] == "turnStarted"] == [
        "hello", "again"]
    with pytest.raises(RpcError) as err:
        await d3.call("session/load", {"sessionId": future})
    assert err.value.code == -32013 and "version 99" in err.value.message
    with pytest.raises(RpcError) as err:
        await d3.call("session/load", {"sessionId": "../../etc/passwd"})
    assert err.value.code == -32602 and "is not a Heddle session id" in err.value.message


async def test_a_starting_daemon_removes_saved_tool_results_of_idle_sessions(
        daemon_env, daemon_command):
    root = Path(daemon_env["XDG_STATE_HOME"]) / "heddle" / "tool-results"
    old, fresh = root / "idle-session" / "toolu_1.txt", root / "busy-session" / "toolu_2.txt"
    for path, age_days in ((old, 30), (fresh, 1)):
        path.parent.mkdir(parents=True)
        path.write_text("a long result")
        stamp = time.time() - age_days * 86400
        os.utime(path, (stamp, stamp))
    client = await lsp.start(daemon_env, daemon_command)
    try:
        deadline = time.monotonic() + 10
        while old.parent.exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert not old.parent.exists() and fresh.exists()
    finally:
        await lsp.stop(client)


async def test_last_reason_is_omitted_when_heddle_stopped_during_the_last_turn(
        daemons, scripted, workspace):
    scripted.add_scenario("r", {"steps": [DONE, SLOW, DONE]})
    d = await daemons()
    idle = (await d.call("session/new", {"workspace": str(workspace), "model": "r"}))["sessionId"]
    sid = (await d.call("session/new", {"workspace": str(workspace), "model": "r"}))["sessionId"]
    assert (await d.call("turn/start", {"sessionId": sid, "prompt": "one"}))["reason"] == "completed"
    turn = asyncio.ensure_future(d.conn.request("turn/start", {"sessionId": sid, "prompt": "two"}))
    await after(d, "textDelta", 1)
    await d.kill()
    with pytest.raises(ConnectionError):
        await turn

    def reasons(listed):
        return {s["sessionId"]: (s["turns"], s.get("lastReason")) for s in listed["sessions"]}
    d2 = await daemons()
    assert reasons(await d2.call("session/list", {})) == {idle: (0, None), sid: (2, None)}
    await d2.call("session/load", {"sessionId": sid})  # repaired: still not how a turn ended
    assert reasons(await d2.call("session/list", {}))[sid] == (2, None)
    assert (await d2.call("turn/start", {"sessionId": sid, "prompt": "three"}))["reason"] == "completed"
    assert reasons(await d2.call("session/list", {}))[sid] == (3, "completed")


async def test_system_prompt_and_thinking_budget_survive_a_restart(daemons, scripted, workspace):
    scripted.add_scenario("o", {"steps": [DONE, DONE]})
    d = await daemons()
    sid = (await d.call("session/new", {"workspace": str(workspace), "model": "o",
                                        "systemPrompt": "Answer in French.",
                                        "thinkingBudget": 2048}))["sessionId"]
    await d.call("turn/start", {"sessionId": sid, "prompt": "one"})
    await d.stop()
    d2 = await daemons()
    await d2.call("session/load", {"sessionId": sid})
    assert (await d2.call("turn/start", {"sessionId": sid, "prompt": "two"}))["reason"] == "completed"
    before, after_load = (r.body for r in scripted.requests_for("o"))
    assert after_load["system"] == before["system"]
    assert "Answer in French." in before["system"][0]["text"]
    assert after_load["thinking"] == before["thinking"] == {"type": "enabled",
                                                            "budget_tokens": 2048}


async def test_session_rules_live_with_the_session(daemons, scripted, workspace):
    """"Always allow" for the session survives a restart; rules added and revoked later too."""
    echo = {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": "echo hi"}}]}
    scripted.add_scenario("rules", {"steps": [echo, DONE, echo, DONE]})

    def session_rules(listed):
        return [(r["kind"], r["rule"]) for r in listed["rules"] if r["scope"] == "session"]
    d = await daemons()
    d.answer = asyncio.get_running_loop().create_future()
    d.answer.set_result({"decision": "allowAlways"})
    sid = (await d.call("session/new", {"workspace": str(workspace), "model": "rules"}))["sessionId"]
    assert (await d.call("turn/start", {"sessionId": sid, "prompt": "one"}))["reason"] == "completed"
    kept = session_rules(await d.call("rules/list", {"sessionId": sid}))
    assert kept == [("allow", "Bash(echo hi:*)")]
    await d.stop()

    d2 = await daemons()
    d2.answer = asyncio.get_running_loop().create_future()  # asking again would hang the turn
    await d2.call("session/load", {"sessionId": sid})
    assert session_rules(await d2.call("rules/list", {"sessionId": sid})) == kept
    assert (await d2.call("turn/start", {"sessionId": sid, "prompt": "two"}))["reason"] == "completed"
    assert not d2.permission_asked.is_set()
    assert d2.events[-1]["event"]["kind"] == "turnEnded"
    assert [e["event"]["status"] for e in d2.events if e["event"]["kind"] == "toolCallFinished"
            ][-1:] == ["ok"]
    other = (await d2.call("session/new", {"workspace": str(workspace)}))["sessionId"]
    assert session_rules(await d2.call("rules/list", {"sessionId": other})) == []
    await d2.call("rules/add", {"sessionId": sid, "rule": "Read(secret.txt)", "kind": "deny"})
    await d2.call("rules/revoke", {"sessionId": sid, "rule": "Bash(echo hi:*)"})
    await d2.stop()

    d3 = await daemons()
    await d3.call("session/load", {"sessionId": sid})
    assert session_rules(await d3.call("rules/list", {"sessionId": sid})) == [
        ("deny", "Read(secret.txt)")]


async def test_loading_a_session_while_its_turn_runs_leaves_the_turn_alone(daemons, scripted,
                                                                           workspace):
    scripted.add_scenario("busy", {"steps": [SLOW, DONE]})
    d = await daemons()
    sid = (await d.call("session/new", {"workspace": str(workspace), "model": "busy"}))["sessionId"]
    turn = asyncio.ensure_future(d.call("turn/start", {"sessionId": sid, "prompt": "go"}))
    await after(d, "textDelta", 2, pause=0.1)
    await d.call("session/load", {"sessionId": sid})  # replayed as far as it got, not closed
    assert (await turn)["reason"] == "completed"
    assert (d.kinds().count("turnStarted"), d.kinds().count("turnEnded")) == (2, 1)
    await d.stop()
    d2 = await daemons()
    loaded = await d2.call("session/load", {"sessionId": sid})
    assert loaded.get("warnings", []) == []
    ends = [e["event"] for e in d2.events if e["event"]["kind"] == "turnEnded"]
    assert [e["reason"] for e in ends] == ["completed"]


async def test_configure_changes_mode_and_model_for_the_next_turn_and_survives_a_restart(
        daemons, scripted, workspace):
    scripted.add_scenario("cfg-a", {"steps": [EDIT, DONE, SLOW]})
    scripted.add_scenario("cfg-b", {"steps": [EDIT, DONE, DONE]})
    d = await daemons()
    sid = (await d.call("session/new", {"workspace": str(workspace), "model": "cfg-a",
                                        "permissionMode": "plan"}))["sessionId"]
    assert (await d.call("turn/start", {"sessionId": sid, "prompt": "one"}))["reason"] == "completed"
    finished = [e["event"] for e in d.events if e["event"]["kind"] == "toolCallFinished"]
    assert finished[-1]["status"] == "rejected"  # plan refuses the edit
    assert "Hello" in (workspace / "app.py").read_text()

    got = await d.call("session/configure", {"sessionId": sid, "permissionMode": "bypassPermissions",
                                             "model": "cfg-b"})
    assert got == {"sessionId": sid, "model": "cfg-b", "permissionMode": "bypassPermissions"}
    assert (await d.call("turn/start", {"sessionId": sid, "prompt": "two"}))["reason"] == "completed"
    assert not d.permission_asked.is_set()  # bypassPermissions ran it without asking
    assert "'Hi, ' + name" in (workspace / "app.py").read_text()
    assert len(scripted.requests_for("cfg-a")) == 2 and len(scripted.requests_for("cfg-b")) == 2
    started = [e["event"] for e in d.events if e["event"]["kind"] == "turnStarted"]
    assert [e["model"] for e in started] == ["cfg-a", "cfg-b"]

    for bad, code in (({"sessionId": sid, "model": ""}, -32602),
                      ({"sessionId": sid, "permissionMode": "yolo"}, -32602),
                      ({"sessionId": "0" * 32, "model": "x"}, -32010)):
        with pytest.raises(RpcError) as err:
            await d.call("session/configure", bad)
        assert err.value.code == code
    await d.stop()

    d2 = await daemons()
    listed = (await d2.call("session/list", {"workspace": str(workspace)}))["sessions"]
    assert [(s["sessionId"], s["model"]) for s in listed][:1] == [(sid, "cfg-b")]
    loaded = await d2.call("session/load", {"sessionId": sid})
    assert (loaded["model"], loaded["permissionMode"]) == ("cfg-b", "bypassPermissions")
    await d2.call("session/configure", {"sessionId": sid, "model": "cfg-a"})
    turn = asyncio.ensure_future(d2.call("turn/start", {"sessionId": sid, "prompt": "three"}))
    await after(d2, "textDelta", 1, pause=0)
    with pytest.raises(RpcError) as err:  # refused while a turn runs: that turn keeps its model
        await d2.call("session/configure", {"sessionId": sid, "permissionMode": "default"})
    assert err.value.code == -32011 and "running turn" in err.value.message
    assert "ifBusy" not in err.value.message  # turn/start's way on, not configure's
    assert (await turn)["reason"] == "completed"
    assert (await d2.call("session/configure", {"sessionId": sid}))["permissionMode"] == \
        "bypassPermissions"
    assert len(scripted.requests_for("cfg-a")) == 3


async def test_an_empty_prompt_or_a_nul_workspace_is_a_clear_error(daemons, scripted, workspace):
    d = await daemons()
    sid = (await d.call("session/new", {"workspace": str(workspace), "model": "any"}))["sessionId"]
    for prompt in ("", "  \n\t"):  # the model would refuse an empty message with a 400
        with pytest.raises(RpcError) as err:
            await d.call("turn/start", {"sessionId": sid, "prompt": prompt})
        assert err.value.code == -32602 and "empty" in str(err.value)
    with pytest.raises(RpcError) as err:
        await d.call("session/list", {"workspace": "/tmp/\u0000"})
    assert err.value.code == -32012 and "NUL" in str(err.value)
    assert scripted.requests_for("any") == []
    (listed,) = (await d.call("session/list", {"workspace": str(workspace)}))["sessions"]
    assert (listed["sessionId"], listed["turns"]) == (sid, 0)
    await d.stop()


HELD = ("trap 'echo $$ > term; until [ -e release ]; do sleep 0.02; done; exit 0' TERM; "
        "echo $$ > started; while :; do sleep 0.02; done")
"""A Bash command whose cancel is held until the test creates `release` (or the kill grace
runs out): `term` says the cancel has reached it."""


async def test_close_ends_the_turn_and_the_prompt_queued_behind_it_and_a_load_waits_for_it(
        daemons, scripted, workspace):
    held = {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": HELD}}]}
    scripted.add_scenario("close", {"steps": [held, DONE]})
    d = await daemons()
    sid = (await d.call("session/new", {"workspace": str(workspace), "model": "close"}))["sessionId"]

    def call(method: str, **params):
        return asyncio.ensure_future(d.call(method, {"sessionId": sid, **params}, timeout=40))

    running = call("turn/start", prompt="first")
    await file_appears(workspace / "started")
    queued = call("turn/start", prompt="queued", ifBusy="queue")
    await d.call("session/list", {})  # answered after the queued prompt was taken
    closing = call("session/close")
    # The close is under way, held in its cancel of the command: everything below reaches the
    # daemon while it closes (the daemon handles requests in the order they come, each up to
    # its first wait, so once session/list is answered every one of them has been taken).
    await file_appears(workspace / "term")
    late = call("turn/start", prompt="too late", ifBusy="queue")
    configure = call("session/configure", model="other")
    compact = call("session/compact")
    again = call("session/close")
    loaded = call("session/load")
    await d.call("session/list", {})
    assert not closing.done() and not again.done() and not loaded.done()
    (workspace / "release").touch()

    first = await running
    assert first["reason"] == "cancelled"
    assert await queued == first  # answered by the cancelled turn; it never ran
    assert (await closing)["sessionId"] == sid
    assert await again == {"sessionId": sid}  # it waited, and stopped nothing itself
    for refused in (late, configure, compact):
        with pytest.raises(RpcError) as err:
            await refused
        assert err.value.code == -32010 and "being closed" in str(err.value)
    assert (await loaded)["turns"] == 1  # read from the transcript, after the close
    assert [s["live"] for s in (await d.call("session/list", {}))["sessions"]] == [True]
    assert (await d.call("turn/start", {"sessionId": sid, "prompt": "go on"},
                         timeout=40))["reason"] == "completed"
    sent = scripted.requests_for("close")
    assert len(sent) == 2  # the first turn's call and the last: the queued prompt never ran
    assert "queued" not in json.dumps(sent[-1].body["messages"])
