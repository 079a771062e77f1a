"""A daemon killed (SIGKILL) at each point of a scripted turn: what it showed survives every load.

For each point: kill → load (the replay closes every started call and ends every turn with
`turnEnded`, everything shown is in it, and the model gets it back) → a turn → clean restart →
load (the same replay, nothing left to repair) → a turn whose request starts with the same
history. The scripted server refuses requests the real API would refuse.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from e2e.bodies import messages_of
from e2e.crashable import (SLEEPER, Daemon, after, assistant_text, file_appears, reap_sleeper,
                           replay_problems, shown_text, transcript_path, turns_of)

DONE = {"content": [{"type": "text", "text": "Continued."}]}
WRITE = {"type": "tool_use", "name": "Write", "input": {"path": "notes.txt",
                                                          "content": "a line of notes\n" * 200}}
READ = {"type": "tool_use", "name": "Read", "input": {"path": "app.py"}}
EDIT = {"type": "tool_use", "name": "Edit", "input": {
    "path": "app.py", "old_string": "'Hello, ' + name", "new_string": "'Hi, ' + name"}}
SLOW = {"chunk": 4, "delayMs": 10}


async def read_done_write_streaming(d: Daemon) -> None:
    await d.wait_for("toolCallFinished")
    await after(d, "toolCallStarted", 2)


POINTS = {
    "mid-text": ([{"content": [{"type": "text", "text": "Streaming words " * 60}], **SLOW}],
                 "default", lambda d, ws: after(d, "textDelta", pause=0.3)),
    "mid-tool-input": ([{"content": [{"type": "text", "text": "Writing it."}, WRITE], **SLOW}],
                       "default", lambda d, ws: after(d, "toolCallStarted")),
    "read-done-answer-streaming": (
        [{"content": [{"type": "text", "text": "Reading first."}, READ,
                      {"type": "text", "text": "Now the notes. " * 20}, WRITE], **SLOW}],
        "default", lambda d, ws: read_done_write_streaming(d)),
    "tool-running": ([{"content": [{"type": "text", "text": "Three calls."}, READ,
                                   {"type": "tool_use", "name": "Bash",
                                    "input": {"command": "exit 3"}},
                                   {"type": "tool_use", "name": "Bash",
                                    "input": {"command": SLEEPER}}]}],
                     "bypassPermissions", lambda d, ws: file_appears(ws / "sleeper.pid")),
    "permission": ([{"content": [{"type": "text", "text": "Editing."}, EDIT]}], "default",
                   lambda d, ws: asyncio.wait_for(d.permission_asked.wait(), 15)),
    "between-rounds": ([{"content": [READ]}, {"fault": {"stall": 30}}], "default",
                       lambda d, ws: after(d, "modelCall", 2, pause=0.3)),
    "sub-agent-tool-input": (
        [{"content": [{"type": "tool_use", "name": "Task", "input": {
            "description": "find greet", "prompt": "Find where greet is defined"}}]},
         {"content": [{"type": "tool_use", "name": "Grep",
                       "input": {"pattern": "greet" + "(x)?" * 400}}], **SLOW}],
        "default", lambda d, ws: after(d, "agent")),
}


async def crash(daemons, scripted, workspace, name: str, steps: list, mode: str, trigger,
                **options) -> tuple[str, list[dict]]:
    """Start a turn, SIGKILL the daemon at `trigger`; the session id and the events it sent."""
    scripted.add_scenario(name, {"steps": steps + [DONE, DONE]})
    d = await daemons()
    d.answer = asyncio.get_running_loop().create_future()  # a permission is never answered
    sid = (await d.call("session/new", {"workspace": str(workspace), "model": name,
                                        "permissionMode": mode, **options}))["sessionId"]
    turn = asyncio.ensure_future(d.conn.request("turn/start", {"sessionId": sid, "prompt": "go"}))
    await trigger(d, workspace)
    await d.kill()
    with pytest.raises(ConnectionError):
        await turn
    return sid, list(d.events)


async def load_and_continue(d: Daemon, scripted, name: str, sid: str, prompt: str
                            ) -> tuple[dict, list[dict], list[dict]]:
    """Load, check the replay, run a turn: (load result, replay, the model request's messages)."""
    loaded = await d.call("session/load", {"sessionId": sid})
    replay = list(d.events)
    assert replay_problems(replay) == []
    result = await d.call("turn/start", {"sessionId": sid, "prompt": prompt})
    assert result["reason"] == "completed", result
    sent = scripted.requests_for(name)[-1]
    assert sent.status == 200, sent.body
    return loaded, replay, messages_of(sent.body)


@pytest.mark.parametrize("point", list(POINTS))
async def test_kill_load_restart_load(point, daemons, scripted, workspace, daemon_env):
    steps, mode, trigger = POINTS[point]
    try:
        sid, shown = await crash(daemons, scripted, workspace, point, steps, mode, trigger)
    finally:
        reap_sleeper(workspace)

    first = await daemons()
    loaded, replay, messages = await load_and_continue(first, scripted, point, sid, "continue")
    assert replay[:len(shown)] == shown  # everything the editor was shown, in order
    ended = replay[-1]["event"]
    assert (ended["kind"], ended["reason"], ended["error"]["code"]) == (
        "turnEnded", "cancelled", "interrupted")
    assert assistant_text(messages).startswith(shown_text(shown))  # and the model has it
    assert messages[-1]["content"][-1]["text"] == "continue"
    await first.stop()
    lines = transcript_path(daemon_env, sid).read_text().splitlines()
    records = [json.loads(line) for line in lines]
    turn_id = shown[0]["turnId"]
    closed = [r for r in records if r["type"] == "end" and r["turnId"] == turn_id]
    assert closed and closed[0]["reason"] is None and closed[0]["interrupted"]  # written down

    second = await daemons()
    again, replay2, messages2 = await load_and_continue(second, scripted, point, sid, "more")
    assert replay2 == first.events  # the same history: first's replay, then its turn
    assert again.get("warnings", []) == []
    assert messages2[:len(messages)] == messages and len(messages2) == len(messages) + 2

    turn = turns_of(replay)[shown[0]["turnId"]]
    CHECKS.get(point, lambda *_: None)(turn, messages, loaded.get("warnings", []), records)


def _read_kept(turn, messages, warnings, records):
    """The Read finished while the answer streamed: its result stays, nothing counts it cut."""
    results = [b for b in messages[2]["content"] if b["type"] == "tool_result"]
    assert len(results) == 1 and "return 'Hello, ' + name" in results[0]["content"]
    assert not results[0].get("is_error")
    assert not any("tool call" in w for w in warnings), warnings
    write = [e["event"] for e in turn if e["event"].get("tool") == "Write"]
    assert [e["kind"] for e in write] == ["toolCallStarted", "toolCallFinished"]


def _one_running(turn, messages, warnings, records):
    """Read and a Bash finished, a Bash was running: one call was interrupted, the finished
    ones keep their results; the one that ran says how its command ended, on disk too (a load
    repairs its toolCallFinished from there when the editor was behind)."""
    assert "1 tool call was running when Heddle stopped; it was marked as interrupted" in warnings
    results = {b["tool_use_id"]: b for b in messages[2]["content"] if b["type"] == "tool_result"}
    read, exits, sleeps = [b["id"] for b in messages[1]["content"] if b["type"] == "tool_use"]
    assert "return 'Hello, ' + name" in results[read]["content"]
    assert "Exit code 3" in results[exits]["content"]
    assert results[sleeps]["is_error"] and "interrupted" in results[sleeps]["content"]
    bash = [e["event"] for e in turn if e["event"].get("toolCallId") == sleeps]
    assert bash[-1] == {"kind": "toolCallFinished", "toolCallId": sleeps, "tool": "Bash",
                        "status": "cancelled", "summary": "interrupted: Heddle stopped"}
    kept = [r for r in records if r["type"] == "toolResult"
            and r["result"]["tool_use_id"] == exits]
    assert [(r["status"], r.get("exitCode"), r.get("signal")) for r in kept] == [
        ("error", 3, None)]
    assert turn[-1]["event"]["cancelPhase"] == "tools"


def _permission_closed(turn, messages, warnings, records):
    answered = [e["event"] for e in turn if e["event"]["kind"] == "permissionAnswered"]
    assert [a["decision"] for a in answered] == ["reject"]


CHECKS = {"read-done-answer-streaming": _read_kept, "tool-running": _one_running,
          "permission": _permission_closed}


async def test_kill_load_kill_load(daemons, scripted, workspace):
    """A second crash after a repaired one: both turns keep what they showed."""
    slow = {"content": [{"type": "text", "text": "Streaming words " * 60}], **SLOW}
    sid, shown = await crash(daemons, scripted, workspace, "twice", [slow, slow], "default",
                             lambda d, ws: after(d, "textDelta", pause=0.3))

    first = await daemons()
    await first.call("session/load", {"sessionId": sid})
    replayed = first.kinds().count("textDelta")
    turn = asyncio.ensure_future(first.conn.request("turn/start", {"sessionId": sid,
                                                                   "prompt": "again"}))
    await after(first, "textDelta", replayed + 1, pause=0.3)
    seen = list(first.events)
    await first.kill()
    with pytest.raises(ConnectionError):
        await turn
    before = messages_of(scripted.requests_for("twice")[-1].body)  # what the second turn sent

    second = await daemons()
    loaded, replay, messages = await load_and_continue(second, scripted, "twice", sid, "more")
    assert replay[:len(seen)] == seen
    assert messages[:len(before)] == before  # the first repair, as the second daemon sent it
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    second_turn = [e for e in seen if e["turnId"] != shown[0]["turnId"]]
    assert messages[1]["content"][0]["text"].startswith(shown_text(shown))
    assert messages[3]["content"][0]["text"].startswith(shown_text(second_turn))
    assert shown_text(second_turn)


async def test_a_reply_cut_off_after_thinking_keeps_its_signed_thinking(daemons, scripted,
                                                                       workspace):
    """The model thought, called Read, thought again and was writing when Heddle stopped: the
    repaired reply keeps each signed thinking block where it came, so the assistant turn that
    has a tool_use starts with its thinking, as the Messages API wants with thinking on."""
    first = {"type": "thinking", "thinking": "The greeting is in app.py.", "signature": "sig-1"}
    second = {"type": "thinking", "thinking": "Now say what it does.", "signature": "sig-2"}
    steps = [{"content": [first, READ, second, {"type": "text", "text": "It greets. " * 60}],
              **SLOW}]

    async def read_done_text_streaming(d: Daemon, ws) -> None:
        await d.wait_for("toolCallFinished")
        await after(d, "textDelta")

    sid, shown = await crash(daemons, scripted, workspace, "thinks", steps, "default",
                             read_done_text_streaming, thinkingBudget=2048)
    d = await daemons()
    _, _, messages = await load_and_continue(d, scripted, "thinks", sid, "continue")
    await d.stop()
    reply = messages[1]["content"]
    assert [b["type"] for b in reply] == ["thinking", "tool_use", "thinking", "text"]
    assert reply[0] == first and reply[2] == second
    assert reply[3]["text"].startswith("It greets.") and shown_text(shown).startswith("It greets.")
    assert scripted.requests_for("thinks")[-1].body["thinking"]["type"] == "enabled"
