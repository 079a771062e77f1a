"""The repeat guard through the daemon: the model warned at the 3rd same call, the 4th refused
and the model told, `loopDetected` on the stream, the user asked (go on / stop), and the turn
ending with `loopDetected` in bypassPermissions mode, for a client that cannot ask, and when
the user stops it; `[loop]` settings change the thresholds."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e import lsp
from e2e.test_turns import new_session

GREP = {"pattern": "no_such_text_anywhere", "path": "."}
GREP_REORDERED = {"path": ".", "pattern": "no_such_text_anywhere"}
READ = {"path": "app.py"}
WARNED = "You have made this same Grep call 3 times with the same result"
REFUSED = "This call did not run: it would have been the 4th time you made this same Grep call"
GONE_ON = "let the turn go on"
TURN = 90.0
"""A turn of these makes up to eight model calls: a fresh daemon on a loaded machine takes
seconds for the first (the SDK warms up), far less for each other."""


def call(name: str, inp: dict) -> dict:
    return {"content": [{"type": "tool_use", "name": name, "input": inp}]}


def done(text: str = "I will try something else.", match: str | None = None) -> dict:
    step: dict = {"content": [{"type": "text", "text": text}]}
    if match:
        step["match"] = {"lastUserContains": match}
    return step


def same_grep_four_times(*after: dict) -> dict:
    # the same call each time, its keys in another order in two of them
    return {"steps": [call("Grep", GREP), call("Grep", GREP_REORDERED), call("Grep", GREP),
                      call("Grep", GREP_REORDERED), *after]}


def last_user_text(scripted, model: str, index: int) -> str:
    """The text of the last user message of request `index` (its tool results and text)."""
    content = scripted.requests_for(model)[index].body["messages"][-1]["content"]
    out = []
    for block in content:
        if block["type"] == "text":
            out.append(block["text"])
        elif block["type"] == "tool_result":
            inner = block["content"]
            out.append(inner if isinstance(inner, str)
                       else "".join(b.get("text", "") for b in inner))
    return "\n".join(out)


async def test_warned_at_the_third_refused_at_the_fourth_and_the_user_lets_it_go_on(
        client, scripted, workspace):
    # told it may go on, the model makes the same call once more: it runs (counting afresh)
    again = dict(call("Grep", GREP), match={"lastUserContains": GONE_ON})
    scripted.add_scenario("loop-on", same_grep_four_times(again, done()))
    sid = await new_session(client, workspace, "loop-on")
    result = await client.call("turn/start", {"sessionId": sid, "prompt": "find it"}, timeout=TURN)

    assert result["reason"] == "completed"
    assert result["text"] == "I will try something else."
    # the 3rd result carries the warning; the 2nd does not
    assert WARNED not in last_user_text(scripted, "loop-on", 2)
    assert WARNED in last_user_text(scripted, "loop-on", 3)
    # the 4th did not run: the model is told why and what to do, and that the user let it on
    told = last_user_text(scripted, "loop-on", 4)
    assert REFUSED in told and "try a different approach" in told and GONE_ON in told
    assert "[Heddle]" not in last_user_text(scripted, "loop-on", 5)
    finished = client.turn_events("toolCallFinished")
    assert [f["status"] for f in finished] == ["ok", "ok", "ok", "rejected", "ok"]
    assert finished[3]["summary"] == "not run: repeated 4 times"
    (found,) = client.turn_events("loopDetected")
    assert found == {"kind": "loopDetected", "toolCallId": finished[3]["toolCallId"],
                     "tool": "Grep", "count": 4, "cycle": ["Grep"],
                     "description": "the agent made the same Grep call 4 times in a row with "
                                    "the same result"}
    (asked,) = client.permission_requests
    assert asked["loop"] is True and asked["toolCallId"] == found["toolCallId"]
    assert [o["label"] for o in asked["options"]] == ["Let it go on", "Stop the turn"]
    assert asked["title"].startswith("Heddle is repeating itself: the agent made the same Grep")
    events = client.turn_events()
    # once the refused call's batch has ended, before the next model call
    between = events[events.index(finished[3]) + 1:events.index(found)]
    assert {e["kind"] for e in between} <= {"usage"}
    assert events[events.index(found) + 1]["kind"] == "modelCall"
    assert events[-1]["kind"] == "turnEnded"


async def test_the_user_stops_a_cycle_of_two(client, scripted, workspace):
    read, grep = call("Read", READ), call("Grep", GREP)
    scripted.add_scenario("loop-cycle", {"steps": [read, grep] * 4})
    client.answer = lambda params: {"decision": "reject"}
    sid = await new_session(client, workspace, "loop-cycle")
    result = await client.call("turn/start", {"sessionId": sid, "prompt": "look"}, timeout=TURN)

    assert result["reason"] == "loopDetected"
    assert result["error"]["code"] == "loopDetected"
    assert result["error"]["message"] == ("the agent repeated the same 2 calls (Read, Grep) 4 "
                                          "times with the same results; the turn was stopped")
    assert len(scripted.requests_for("loop-cycle")) == 7  # the 7th call was refused; no 8th
    (found,) = client.turn_events("loopDetected")
    assert (found["count"], found["cycle"]) == (4, ["Read", "Grep"])
    assert client.turn_events("turnEnded")[-1]["reason"] == "loopDetected"
    statuses = [f["status"] for f in client.turn_events("toolCallFinished")]
    assert statuses == ["ok"] * 6 + ["rejected"]
    # the conversation is whole: a next turn sends the refused call's result
    scripted.add_scenario("after", {"steps": [done("OK.")]})
    await client.call("session/configure", {"sessionId": sid, "model": "after"})
    again = await client.call("turn/start", {"sessionId": sid, "prompt": "and now?"},
                              timeout=TURN)
    assert again["reason"] == "completed"
    sent = scripted.requests_for("after")[0].body["messages"]
    assert "This call did not run" in str(sent[-1]["content"])  # merged with the prompt


async def test_bypass_mode_ends_the_turn_without_asking(client, scripted, workspace):
    scripted.add_scenario("loop-bypass", same_grep_four_times())
    sid = await new_session(client, workspace, "loop-bypass", permissionMode="bypassPermissions")
    result = await client.call("turn/start", {"sessionId": sid, "prompt": "find it"}, timeout=TURN)

    assert result["reason"] == "loopDetected"
    assert result["error"]["message"].endswith(
        "; the turn ends (bypassPermissions mode does not ask)")
    assert client.permission_requests == []
    assert len(client.turn_events("loopDetected")) == 1


@pytest.fixture
async def mute_client(daemon_env, daemon_command):
    c = await lsp.start(daemon_env, daemon_command, permission_requests=False)
    yield c
    await lsp.stop(c)


async def test_a_client_that_cannot_ask_gets_the_turn_ended(mute_client, scripted, workspace):
    scripted.add_scenario("loop-mute", same_grep_four_times())
    sid = await new_session(mute_client, workspace, "loop-mute")
    result = await mute_client.call("turn/start", {"sessionId": sid, "prompt": "find it"},
                                    timeout=TURN)

    assert result["reason"] == "loopDetected"
    assert result["error"]["message"].endswith("; the turn was stopped: the editor cannot "
                                               "answer permission requests")
    assert mute_client.permission_requests == []


def user_settings(daemon_env: dict[str, str], text: str) -> None:
    path = Path(daemon_env["XDG_CONFIG_HOME"]) / "heddle/settings.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def guard_off(daemon_env: dict[str, str]) -> None:
    """For tests whose scripted model repeats a call on purpose (a long session, a load):
    the user settings turn the repeat guard off (read by each new session)."""
    user_settings(daemon_env, "[loop]\nwarn_at = 0\nstop_at = 0\n")


async def test_loop_settings_set_the_thresholds(client, scripted, workspace, daemon_env):
    user_settings(daemon_env, "[loop]\nwarn_at = 2\nstop_at = 0\n")
    scripted.add_scenario("loop-lax", {"steps": [call("Grep", GREP)] * 5 + [done()]})
    sid = await new_session(client, workspace, "loop-lax")
    result = await client.call("turn/start", {"sessionId": sid, "prompt": "find it"}, timeout=TURN)

    assert result["reason"] == "completed"
    assert [f["status"] for f in client.turn_events("toolCallFinished")] == ["ok"] * 5
    assert "same Grep call 2 times" in last_user_text(scripted, "loop-lax", 2)
    assert "same Grep call 5 times" in last_user_text(scripted, "loop-lax", 5)
    assert "From the" not in last_user_text(scripted, "loop-lax", 5)  # nothing will refuse
    assert client.turn_events("loopDetected") == []


async def test_a_bad_loop_setting_is_reported_and_the_default_used(client, scripted, workspace,
                                                                   daemon_env):
    user_settings(daemon_env, "[loop]\nstop_at = 1\n")
    scripted.add_scenario("loop-bad", same_grep_four_times(done()))
    created = await client.call("session/new", {"workspace": str(workspace),
                                                "model": "loop-bad"})
    assert any("loop.stop_at: 1 would count every call as a repetition" in w
               for w in created["warnings"])
    client.answer = lambda params: {"decision": "allowOnce"}
    result = await client.call("turn/start", {"sessionId": created["sessionId"],
                                              "prompt": "find it"}, timeout=TURN)
    assert result["reason"] == "completed"
    assert len(client.turn_events("loopDetected")) == 1


async def test_rerunning_after_an_edit_is_no_loop(client, scripted, workspace):
    grep = call("Grep", GREP)
    write = [call("Write", {"path": f"notes{n}.txt", "content": "x"}) for n in range(2)]
    scripted.add_scenario("loop-edits", {"steps": [grep, grep, write[0], grep, grep, write[1],
                                                   grep, grep, done("Done.")]})
    sid = await new_session(client, workspace, "loop-edits", permissionMode="acceptEdits")
    result = await client.call("turn/start", {"sessionId": sid, "prompt": "go"}, timeout=TURN)

    assert result["reason"] == "completed"
    assert [f["status"] for f in client.turn_events("toolCallFinished")] == ["ok"] * 8
    assert client.turn_events("loopDetected") == []
    assert not any("[Heddle]" in last_user_text(scripted, "loop-edits", i) for i in range(1, 9))
