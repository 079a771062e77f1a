"""The loop's mechanisms through the daemon: transitions, the recovery ladder and its bounds,
fallback, budgets, limits, interrupting and queued prompts, thinking, tool summaries."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

from e2e import lsp
from e2e.test_turns import new_session

READ = {"content": [{"type": "tool_use", "name": "Read", "input": {"path": "app.py"}}]}
DONE = {"content": [{"type": "text", "text": "Done."}]}


async def turn(client, sid, prompt="go", **extra):
    return await client.call("turn/start", {"sessionId": sid, "prompt": prompt, **extra}, timeout=40)


async def test_tool_rounds_record_next_turn_transitions(client, scripted, workspace):
    scripted.add_scenario("s", {"steps": [READ, READ, DONE]})
    sid = await new_session(client, workspace, "s")
    result = await turn(client, sid)
    assert result["reason"] == "completed"
    assert result["transitions"] == ["next_turn", "next_turn"]
    calls = client.turn_events("modelCall")
    assert [c["index"] for c in calls] == [0, 1, 2]


async def test_output_limit_escalation_then_three_nudges_then_stop(client, scripted, workspace):
    cut = {"content": [{"type": "text", "text": "partial answer"}], "stopReason": "max_tokens"}
    scripted.add_scenario("s", {"steps": [cut], "repeat": True})
    sid = await new_session(client, workspace, "s")
    result = await turn(client, sid)
    # 1 call + 1 escalated retry + 3 continuation nudges: bounded even if the model never stops
    assert len(scripted.requests_for("s")) == 5
    assert result["transitions"] == ["max_output_tokens_escalate"] + ["max_output_tokens_recovery"] * 3
    assert result["reason"] == "completed"
    assert result["error"]["code"] == "maxOutputTokens"
    requests = [r.body for r in scripted.requests_for("s")]
    # "s" is not in the table: its maximum output is the unknown model's 32,000
    assert [r["max_tokens"] for r in requests] == [8192, 32000, 32000, 32000, 32000]
    assert requests[2]["messages"][-1]["content"][-1]["text"].startswith("Output token limit hit")
    assert client.turn_events("tombstone")[0]["index"] == 0
    assert len(client.turn_events("error")) == 1  # withheld until recovery ran out


async def test_raising_the_output_limit_is_enough(client, scripted, workspace):
    long_text = "word " * 8000  # about 10,000 tokens: more than 8,192
    scripted.add_scenario("s", {"steps": [{"content": [{"type": "text", "text": long_text}]}],
                                "repeat": True})
    sid = await new_session(client, workspace, "s")
    result = await turn(client, sid)
    assert result["reason"] == "completed" and "error" not in result
    assert result["transitions"] == ["max_output_tokens_escalate"]
    assert result["text"] == long_text


async def test_fallback_model_takes_over_and_strips_thinking(client, scripted, workspace):
    thinking_read = {"content": [{"type": "thinking", "thinking": "look first", "signature": "s1"},
                                 {"type": "tool_use", "name": "Read", "input": {"path": "app.py"}}]}
    scripted.add_scenario("primary", {"steps": [
        thinking_read, {"fault": {"status": 529, "retryAfter": 0.01, "times": 10}}]})
    scripted.add_scenario("backup", {"steps": [DONE]})
    sid = await new_session(client, workspace, "primary", fallbackModel="backup")
    result = await turn(client, sid)
    assert result["reason"] == "completed" and result["text"] == "Done."
    (fallback,) = client.turn_events("modelFallback")
    assert (fallback["fromModel"], fallback["toModel"]) == ("primary", "backup")
    assert fallback["error"]["code"] == "overloaded"
    assert [c["model"] for c in client.turn_events("modelCall")] == ["primary", "primary", "backup"]
    assert client.turn_events("tombstone")[0]["index"] == 1
    sent = scripted.requests_for("backup")[0].body["messages"]
    assert all(b["type"] != "thinking" for m in sent for b in m["content"])
    assert sent[1]["content"][0]["type"] == "tool_use"  # history kept, from the break point


async def test_settings_fallback_model_applies_unless_the_environment_names_one(
        client, scripted, workspace, daemon_env, daemon_command):
    settings = Path(daemon_env["XDG_CONFIG_HOME"]) / "heddle" / "settings.toml"
    settings.parent.mkdir(parents=True)
    settings.write_text('fallback_model = "from-settings"\n')
    overloaded = {"fault": {"status": 529, "retryAfter": 0.01, "times": 5}}  # 1 call + 4 retries
    scripted.add_scenario("primary", {"steps": [overloaded], "repeat": True})
    for name in ("from-settings", "from-params", "from-env"):
        scripted.add_scenario(name, {"steps": [{"content": [{"type": "text", "text": name}]}]})

    sid = await new_session(client, workspace, "primary")
    assert (await turn(client, sid)).get("text") == "from-settings"
    sid = await new_session(client, workspace, "primary", fallbackModel="from-params")
    assert (await turn(client, sid)).get("text") == "from-params"
    assert [f["toModel"] for f in client.turn_events("modelFallback")] == [
        "from-settings", "from-params"]

    env = await lsp.start(dict(daemon_env, HEDDLE_FALLBACK_MODEL="from-env"), daemon_command)
    try:
        sid = await new_session(env, workspace, "primary")
        assert (await turn(env, sid)).get("text") == "from-env"
    finally:
        await lsp.stop(env)
    assert len(scripted.requests_for("primary")) == 15


async def test_only_an_overloaded_model_falls_back(client, scripted, workspace):
    scripted.add_scenario("backup", {"steps": [DONE], "repeat": True})
    faults = {
        "bad-request": ({"status": 400}, "invalidRequest", 1),
        "no-auth": ({"status": 401}, "authentication", 1),
        "server-error": ({"status": 500, "retryAfter": 0.01, "times": 5}, "serverError", 5),
        "broke-mid-answer": ({"errorEvent": "api_error", "afterEvents": 6, "times": 5},
                             "serverError", 5)}
    for name, (fault, code, calls) in faults.items():
        scripted.add_scenario(name, {"steps": [{"content": [{"type": "text", "text": "partial "
                                                             "answer"}], "chunk": 2,
                                                "fault": fault}]})
        sid = await new_session(client, workspace, name, fallbackModel="backup")
        result = await turn(client, sid)
        assert (result["reason"], result.get("error", {}).get("code")) == ("modelError", code)
        assert len(scripted.requests_for(name)) == calls
    assert client.turn_events("modelFallback") == []
    assert {c["model"] for c in client.turn_events("modelCall")} == set(faults)
    assert scripted.requests_for("backup") == []


async def test_a_model_that_cannot_be_reached_does_not_fall_back(daemon_env, daemon_command,
                                                                  workspace):
    with socket.socket() as s:  # a port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    c = await lsp.start(dict(daemon_env, ANTHROPIC_BASE_URL=f"http://127.0.0.1:{port}"),
                        daemon_command)
    try:
        sid = await new_session(c, workspace, "primary", fallbackModel="backup")
        result = await turn(c, sid)  # five attempts
    finally:
        await lsp.stop(c)
    assert (result["reason"], result.get("error", {}).get("code")) == ("modelError", "connection")
    retries = c.turn_events("retry")
    assert [r["attempt"] for r in retries] == [2, 3, 4, 5]
    # the back-off doubles from HEDDLE_RETRY_DELAY, with up to a quarter taken off at random
    for n, r in enumerate(retries):
        full = float(daemon_env["HEDDLE_RETRY_DELAY"]) * 1000 * 2 ** n
        assert 0.75 * full - 1 <= r["delayMs"] <= full, (n, r["delayMs"])
    assert {r["maxAttempts"] for r in c.turn_events("retry")} == {5}
    assert c.turn_events("modelFallback") == []
    assert [m["model"] for m in c.turn_events("modelCall")] == ["primary"]


async def test_fallback_mid_stream_discards_the_partial_response(client, scripted, workspace):
    broken = {"content": [{"type": "text", "text": "Let me check. "},
                          {"type": "tool_use", "name": "Bash", "input": {"command": "touch x"}},
                          {"type": "text", "text": "more text that never arrives"}],
              "chunk": 4, "fault": {"errorEvent": "overloaded_error", "afterEvents": 20,
                                    "times": 5}}
    scripted.add_scenario("primary", {"steps": [broken]})
    scripted.add_scenario("backup", {"steps": [DONE]})
    sid = await new_session(client, workspace, "primary", fallbackModel="backup")
    result = await turn(client, sid)
    assert result["reason"] == "completed"
    assert not (workspace / "x").exists()  # the unsafe call of the failed attempt never ran
    finished = client.turn_events("toolCallFinished")
    assert [f["status"] for f in finished] == ["cancelled"] * 5  # one per attempt
    sent = scripted.requests_for("backup")[0].body["messages"]
    assert [m["role"] for m in sent] == ["user"]


async def test_token_budget_continues_to_ninety_percent(client, scripted, workspace):
    chunk = {"content": [{"type": "text", "text": "x" * 2400}]}  # 600 output tokens each
    scripted.add_scenario("s", {"steps": [chunk], "repeat": True})
    sid = await new_session(client, workspace, "s")
    result = await turn(client, sid, prompt="refactor everything +2k")
    assert result["reason"] == "completed"
    assert result["transitions"] == ["token_budget_continuation"] * 2
    assert len(scripted.requests_for("s")) == 3
    nudge = scripted.requests_for("s")[1].body["messages"][-1]["content"][-1]["text"]
    assert "600 of the 2,000-token budget" in nudge
    assert client.turn_events("usage")[-1]["tokenBudget"] == 2000


async def test_token_budget_stops_on_diminishing_returns(client, scripted, workspace):
    scripted.add_scenario("s", {"steps": [{"content": [{"type": "text", "text": "ok"}]}],
                                "repeat": True})
    sid = await new_session(client, workspace, "s")
    result = await turn(client, sid, tokenBudget=100_000)
    assert len(scripted.requests_for("s")) == 4
    assert result["transitions"] == ["token_budget_continuation"] * 3


async def test_task_budget_and_blocking_limit(client, scripted, workspace, daemon_env,
                                              daemon_command):
    scripted.add_scenario("s", {"steps": [READ], "repeat": True})
    sid = await new_session(client, workspace, "s")
    spent = await turn(client, sid, taskBudget=50)
    assert spent["reason"] == "tokenBudget" and len(scripted.requests_for("s")) == 1

    small = await lsp.start(dict(daemon_env, HEDDLE_CONTEXT_WINDOW="25000"), daemon_command)
    try:
        sid2 = await new_session(small, workspace, "s")
        # a short prompt fits; the first call's reported input (the system prompt and tools
        # too) does not leave room for the next
        blocked = await small.call("turn/start", {"sessionId": sid2, "prompt": "y"})
    finally:
        await lsp.stop(small)
    assert blocked["reason"] == "blockingLimit"
    assert "too close to the context window" in blocked["error"]["message"]
    assert len(scripted.requests_for("s")) == 2  # the first call; nothing over the limit


async def test_interrupting_prompt_replaces_the_turn_without_a_note(client, scripted, workspace):
    slow = {"content": [{"type": "text", "text": "word " * 300}], "chunk": 5, "delayMs": 10}
    scripted.add_scenario("s", {"steps": [slow, DONE]})
    sid = await new_session(client, workspace, "s")
    first = asyncio.ensure_future(turn(client, sid, prompt="first"))
    await client.wait_for_event("textDelta")
    second = await turn(client, sid, prompt="actually, do this", ifBusy="interrupt")
    first = await asyncio.wait_for(first, 10)
    assert first["reason"] == "cancelled" and second["reason"] == "completed"
    sent = scripted.requests_for("s")[1].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[1]["content"][0]["text"].startswith("word")
    assert [b["text"] for b in sent[2]["content"]] == ["actually, do this"]


async def test_queued_prompt_joins_the_running_turn(daemon_env, daemon_command, scripted,
                                                     workspace):
    # the Bash call holds the turn until the gate exists (at most 30 s)
    gated = "for i in $(seq 1500); do [ -e gate ] && break; sleep 0.02; done"
    bash = {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": gated}}]}
    scripted.add_scenario("s", {"steps": [bash, DONE]})
    c = await lsp.start(daemon_env, daemon_command)
    try:
        sid = await new_session(c, workspace, "s", permissionMode="bypassPermissions")
        first = asyncio.ensure_future(turn(c, sid, prompt="first"))
        await c.wait_for_event("toolCallInput")
        second = asyncio.ensure_future(turn(c, sid, prompt="and also this", ifBusy="queue"))
        # requests are taken in the order they arrive: once this is answered, the prompt is
        # queued in the running turn, and only then does its Bash call end
        await c.call("session/list", {}, timeout=10)
        (workspace / "gate").touch()
        first, second = await asyncio.wait_for(asyncio.gather(first, second), 30)
    finally:
        await lsp.stop(c)
    assert first["reason"] == second["reason"] == "completed"
    assert second["turnId"] == first["turnId"]  # answered by the turn that took it in
    last = scripted.requests_for("s")[1].body["messages"][-1]["content"]
    assert last[0]["type"] == "tool_result"
    assert last[1]["text"].endswith("and also this")


async def test_queued_prompt_of_a_cancelled_turn_runs_on_its_own(client, scripted, workspace):
    slow = {"content": [{"type": "text", "text": "word " * 300}], "chunk": 5, "delayMs": 10}
    scripted.add_scenario("s", {"steps": [slow, DONE]})
    sid = await new_session(client, workspace, "s")
    first = asyncio.ensure_future(turn(client, sid, prompt="first"))
    await client.wait_for_event("textDelta")
    second = asyncio.ensure_future(turn(client, sid, prompt="queued", ifBusy="queue"))
    # the daemon takes requests in the order they arrive: once one sent after the queued
    # prompt is answered, the prompt waits in the session's queue, so the cancel finds it there
    await client.call("session/list", {"workspace": str(workspace)}, timeout=10)
    client.protocol.notify("turn/cancel", {"sessionId": sid})
    first, second = await asyncio.wait_for(asyncio.gather(first, second), 15)
    assert first["reason"] == "cancelled" and second["reason"] == "completed"
    assert second["turnId"] != first["turnId"]
    assert scripted.requests_for("s")[1].body["messages"][-1]["content"][-1]["text"] == "queued"


async def test_thinking_streams_and_stays_in_the_trajectory(client, scripted, workspace):
    think = {"content": [{"type": "thinking", "thinking": "Reading first.", "signature": "sig"},
                         {"type": "tool_use", "name": "Read", "input": {"path": "app.py"}}]}
    scripted.add_scenario("s", {"steps": [think, DONE]})
    sid = await new_session(client, workspace, "s", thinkingBudget=2048)
    result = await turn(client, sid)
    assert result["reason"] == "completed"
    assert "".join(e["text"] for e in client.turn_events("thinkingDelta")) == "Reading first."
    second = scripted.requests_for("s")[1].body
    assert second["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert second["messages"][1]["content"][0] == {"type": "thinking", "thinking": "Reading first.",
                                                   "signature": "sig"}


async def test_tool_batches_get_one_line_summaries(client, scripted, workspace):
    # the summary arrives while the loop goes on (here: a Bash call that waits for a gate the
    # test makes once the summary is in, at most 30 s); it never delays the loop
    gated = "for i in $(seq 1500); do [ -e gate ] && break; sleep 0.02; done"
    wait = {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": gated}}]}
    scripted.add_scenario("s", {"steps": [READ, wait, DONE]})
    scripted.add_scenario("cheap", {"steps": [  # its first answer breaks off: asked again
        {"content": [{"type": "text", "text": "Looked at"}], "chunk": 4,
         "fault": {"drop": True, "afterEvents": 4}},
        {"content": [{"type": "text", "text": "Read app.py"}]}]})
    sid = await new_session(client, workspace, "s", summaryModel="cheap",
                            permissionMode="bypassPermissions")
    running = asyncio.ensure_future(turn(client, sid))
    try:
        summary = await client.wait_for_event("toolSummary", timeout=30)
    finally:
        (workspace / "gate").touch()
    result = await asyncio.wait_for(running, 30)
    assert result["reason"] == "completed"
    # the Bash batch's summary finds no third answer (or is cancelled as the turn ends)
    (summary,) = client.turn_events("toolSummary")
    assert summary["summary"] == "Read app.py"
    assert len(summary["toolCallIds"]) == 1
    asked = scripted.requests_for("cheap")
    assert [r.step_index for r in asked[:2]] == [0, 1]  # the dropped answer, then its retry
    assert "Read" in asked[0].body["messages"][0]["content"][0]["text"]
    assert asked[0].body["max_tokens"] == 64
    assert "Bash" not in asked[1].body["messages"][0]["content"][0]["text"]


async def test_prompt_too_long_collapses_older_rounds_first(client, scripted, workspace):
    too_long = {"fault": {"status": 400, "promptTooLong": True}}
    summary = {"content": [{"type": "text", "text": "Read app.py twice; nothing found."}]}
    scripted.add_scenario("s", {"steps": [READ] * 6 + [too_long, summary, DONE]})
    sid = await new_session(client, workspace, "s")
    result = await turn(client, sid)
    assert result["reason"] == "completed"
    assert result["transitions"] == ["next_turn"] * 6 + ["collapse_drain_retry"]
    (compaction,) = client.turn_events("compaction")
    assert compaction["layer"] == "collapse"
    assert client.turn_events("error") == []
    retried = scripted.requests_for("s")[-1].body["messages"]
    assert "Read app.py twice" in retried[0]["content"][-1]["text"]
    assert len(retried) < len(scripted.requests_for("s")[6].body["messages"])


async def test_collapse_is_tried_once_then_the_whole_history_is_compacted(client, scripted,
                                                                          workspace):
    too_long = {"fault": {"status": 400, "promptTooLong": True}}
    collapsed = {"content": [{"type": "text", "text": "Read app.py once."}]}
    compacted = {"content": [{"type": "text", "text": "Goal: look at app.py."}]}
    # still too long after the collapse: there are rounds left to collapse, but the second
    # recovery step is the full compaction
    scripted.add_scenario("s", {"steps": [READ] * 6 + [too_long, collapsed, too_long,
                                                       compacted, DONE]})
    sid = await new_session(client, workspace, "s")
    result = await turn(client, sid)
    assert result["reason"] == "completed" and result["text"] == "Done."
    assert result["transitions"] == ["next_turn"] * 6 + ["collapse_drain_retry",
                                                         "reactive_compact_retry"]
    assert [c["layer"] for c in client.turn_events("compaction")] == ["collapse", "reactive"]
    assert client.turn_events("error") == []
    retried = scripted.requests_for("s")[-1].body["messages"]
    assert "Goal: look at app.py." in retried[0]["content"][0]["text"]
