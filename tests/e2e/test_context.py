"""Long sessions through the daemon: the model never receives an over-limit request."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from e2e import lsp
from e2e.test_turns import new_session
from e2e.test_repeats import guard_off

WINDOW = 60_000  # effective 40,000; auto-compact at 27,000; blocking at 37,000 (estimated)


async def test_three_hundred_iterations_stay_under_the_window(daemon_env, daemon_command,
                                                              scripted, workspace):
    (workspace / "big.txt").write_text("".join(f"line {i}: " + "data " * 14 + "\n"
                                               for i in range(120)))
    scripted.add_scenario("long", {"contextWindow": WINDOW, "repeat": True, "steps": [
        {"content": [{"type": "tool_use", "name": "Read", "input": {"path": "big.txt"}}]}]})
    scripted.add_scenario("summ", {"contextWindow": WINDOW, "repeat": True, "steps": [
        {"content": [{"type": "text", "text": "Goal: read big.txt repeatedly. Files: big.txt."}]}]})
    guard_off(daemon_env)  # the same call again and again is the point here
    env = dict(daemon_env, HEDDLE_CONTEXT_WINDOW=str(WINDOW), HEDDLE_LOG_LEVEL="INFO")
    c = await lsp.start(env, daemon_command)
    try:
        sid = await new_session(c, workspace, "long", compactModel="summ")
        result = await c.call("turn/start", {"sessionId": sid, "prompt": "read big.txt forever",
                                             "maxTurns": 305}, timeout=55)
    finally:
        await lsp.stop(c)
    assert result["reason"] == "maxTurns"
    requests = scripted.requests_for("long")
    assert len(requests) == 305
    assert [r.status for r in requests] == [200] * 305  # never over the limit
    layers = {e["layer"] for e in c.turn_events("compaction")}
    assert "microcompact" in layers and layers & {"collapse", "auto", "snip"}
    # the task survives every layer: the first prompt or a summary naming it is always sent
    last = requests[-1].body["messages"][0]["content"]
    assert any("read big.txt" in b.get("text", "") for b in last)
    usage = c.turn_events("usage")[-1]
    assert usage["contextWindow"] == WINDOW and 0 < usage["contextTokens"] < 37_000


async def test_long_answers_are_collapsed_into_summaries(daemon_env, daemon_command, scripted,
                                                         workspace):
    talk = {"content": [{"type": "text", "text": "Thinking out loud about the code. " * 60},
                        {"type": "tool_use", "name": "Grep", "input": {"pattern": "greet"}}]}
    scripted.add_scenario("chatty", {"contextWindow": WINDOW, "repeat": True, "steps": [talk]})
    scripted.add_scenario("summ", {"contextWindow": WINDOW, "repeat": True, "steps": [
        {"content": [{"type": "text", "text": "Goal: keep searching for greet."}]}]})
    guard_off(daemon_env)  # the same call again and again is the point here
    env = dict(daemon_env, HEDDLE_CONTEXT_WINDOW=str(WINDOW), HEDDLE_LOG_LEVEL="INFO")
    c = await lsp.start(env, daemon_command)
    try:
        sid = await new_session(c, workspace, "chatty", compactModel="summ")
        result = await c.call("turn/start", {"sessionId": sid, "prompt": "search for greet",
                                             "maxTurns": 305}, timeout=55)
    finally:
        await lsp.stop(c)
    assert result["reason"] == "maxTurns"
    statuses = [r.status for r in scripted.requests_for("chatty")]
    assert statuses == [200] * 305
    events = c.turn_events("compaction")
    assert any(e["layer"] == "collapse" for e in events)
    summaries = len(scripted.requests_for("summ"))
    assert 0 < summaries < 40  # compaction aims well under the threshold, so it runs rarely
    assert all(e["tokensAfter"] < e["tokensBefore"] for e in events)


async def test_manual_compaction_keeps_recent_rounds(client, scripted, workspace):
    read = {"content": [{"type": "tool_use", "name": "Read", "input": {"path": "app.py"}}]}
    done = {"content": [{"type": "text", "text": "Read it."}]}
    scripted.add_scenario("s", {"steps": [read, read, read, done, done]})
    scripted.add_scenario("summ", {"steps": [
        {"content": [{"type": "text", "text": "Goal: read app.py."}]}]})
    sid = await new_session(client, workspace, "s", compactModel="summ")
    await client.call("turn/start", {"sessionId": sid, "prompt": "read app.py thrice"})
    compacted = await client.call("session/compact", {"sessionId": sid})
    assert compacted["summary"] == "Goal: read app.py."
    assert compacted["tokensAfter"] < compacted["tokensBefore"]
    await client.call("turn/start", {"sessionId": sid, "prompt": "and now?"})
    sent = scripted.requests_for("s")[-1].body["messages"]
    assert "Goal: read app.py." in sent[0]["content"][0]["text"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user", "assistant", "user"]
    assert sent[-1]["content"][-1]["text"] == "and now?"
    try:
        await client.call("session/compact", {"sessionId": "missing"})
    except Exception as exc:
        assert "no session" in str(exc)
    else:
        raise AssertionError("compacted a missing session")


async def test_oversized_tool_result_is_cut_and_saved_for_reading_back(client, scripted,
                                                                       workspace, daemon_env):
    (workspace / "many.txt").write_text("".join(f"needle {i}\n" for i in range(6000)))
    sid = await new_session(client, workspace, "s")
    saved = (Path(daemon_env["XDG_STATE_HOME"]) / "heddle" / "tool-results" / sid
             / "toolu_grep.txt")
    scripted.add_scenario("s", {"steps": [
        {"content": [{"type": "tool_use", "id": "toolu_grep", "name": "Grep",
                      "input": {"pattern": "needle"}}]},
        {"content": [{"type": "tool_use", "name": "Read",
                      "input": {"path": str(saved), "offset": 3000, "limit": 2}}]},
        {"content": [{"type": "text", "text": "Found them."}]}]})
    result = await client.call("turn/start", {"sessionId": sid, "prompt": "find"})
    assert result["reason"] == "completed"
    grep_result = scripted.requests_for("s")[1].body["messages"][-1]["content"][0]["content"]
    assert len(grep_result) < 32_000 and "characters omitted" in grep_result
    assert f"is saved in {saved}" in grep_result
    assert saved.read_text().count("needle") == 6000
    # the saved file is outside the workspace, yet Read may page through it
    read_back = scripted.requests_for("s")[2].body["messages"][-1]["content"][0]
    assert read_back["is_error"] is False
    assert "needle 2999" in read_back["content"]


async def test_a_prompt_while_the_session_is_compacted_is_refused_busy(client, scripted,
                                                                        workspace):
    read = {"content": [{"type": "tool_use", "name": "Read", "input": {"path": "app.py"}}]}
    done = {"content": [{"type": "text", "text": "Read it."}]}
    scripted.add_scenario("s", {"steps": [read, read, read, done, done]})
    scripted.add_scenario("summ", {"steps": [  # a summary slow enough to ask meanwhile
        {"content": [{"type": "text", "text": "Goal: read app.py. " * 20}], "chunk": 8,
         "delayMs": 150}]})  # ~7 s: the four refusals below come while it is written
    sid = await new_session(client, workspace, "s", compactModel="summ")
    await client.call("turn/start", {"sessionId": sid, "prompt": "read app.py thrice"})
    compacting = asyncio.ensure_future(client.call("session/compact", {"sessionId": sid}))
    deadline = asyncio.get_running_loop().time() + 30
    while not scripted.requests_for("summ"):  # the summary is being written
        assert asyncio.get_running_loop().time() < deadline, "no summary was asked for"
        await asyncio.sleep(0.01)
    for if_busy in ("reject", "queue", "interrupt"):
        with pytest.raises(Exception, match="is being compacted; send the prompt once") as err:
            await client.call("turn/start", {"sessionId": sid, "prompt": "meanwhile",
                                             "ifBusy": if_busy})
        assert err.value.code == -32011
    with pytest.raises(Exception, match="is being compacted already") as err:
        await client.call("session/compact", {"sessionId": sid})
    assert err.value.code == -32011 and "send the prompt" not in str(err.value)  # no prompt here
    compacted = await asyncio.wait_for(compacting, 30)
    assert compacted["summary"].startswith("Goal: read app.py.")
    after = await client.call("turn/start", {"sessionId": sid, "prompt": "and now?"})
    assert after["reason"] == "completed"
    sent = scripted.requests_for("s")[-1].body["messages"]
    assert "Goal: read app.py." in sent[0]["content"][0]["text"]
    assert "meanwhile" not in json.dumps(sent)
