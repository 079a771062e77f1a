"""Streams that break are retried through the daemon, at every point of a response, whatever
of it was shown: the shown part is tombstoned, the requests are bounded, and the editor and the
model agree on every tool call's fate."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from e2e import lsp
from e2e.test_turns import new_session

# The broken response, chunk 4. Its SSE events, counted from 0 (afterEvents counts sent ones):
#   0 message_start  1 content_block_start (text)  2 ping  3-8 text deltas  9 stop
#  10 content_block_start (Read app.py)  11-16 input deltas  17 stop: the Read starts running
#  18 content_block_start (Read README.md)  19-24 input deltas  25 stop
#  26 message_delta  27 message_stop
BROKEN = [{"type": "text", "text": "Reading both files now."},
          {"type": "tool_use", "name": "Read", "input": {"path": "app.py"}},
          {"type": "tool_use", "name": "Read", "input": {"path": "README.md"}}]
POINTS = {"after-message-start": 1, "after-first-block-start": 2, "mid-text": 5,
          "mid-tool-input": 21}
RETRIED = {"content": [{"type": "text", "text": "Reading it now."},
                       {"type": "tool_use", "name": "Read", "input": {"path": "app.py"}}]}
DONE = {"content": [{"type": "text", "text": "Done."}]}
FAULTS = {"error": {"errorEvent": "overloaded_error"}, "drop": {"drop": True}}
CASES = [pytest.param(FAULTS[kind], after, id=f"{kind}-{point}")
         for kind in FAULTS for point, after in POINTS.items()]
CASES.append(pytest.param({"endEarly": True}, 99, id="no-message-stop"))


async def turn(client, sid, prompt="go"):
    return await client.call("turn/start", {"sessionId": sid, "prompt": prompt}, timeout=40)


def last_finished(client) -> dict[str, dict]:
    """Each tool call's last toolCallFinished: what the editor was told last."""
    return {f["toolCallId"]: f for f in client.turn_events("toolCallFinished")}


def tool_uses(requests) -> set[str]:
    return {b["id"] for r in requests for m in r.body["messages"] if m["role"] == "assistant"
            for b in m["content"] if b["type"] == "tool_use"}


def results_in(request) -> dict[str, dict]:
    return {b["tool_use_id"]: b for m in request.body["messages"] if m["role"] == "user"
            for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"}


def assert_editor_and_model_agree(client, requests) -> None:
    """Every call the editor saw: its result reached the model as the editor was told, or
    the model never saw the call and the editor was told it was cancelled."""
    sent_uses = tool_uses(requests)
    results = results_in(requests[-1])
    for call_id, finished in last_finished(client).items():
        if call_id in results:
            assert results[call_id]["is_error"] is (finished["status"] != "ok"), finished
        else:
            assert call_id not in sent_uses, finished  # a tool_use without its result
            assert finished["status"] == "cancelled", finished
            assert finished["summary"].startswith(("discarded: ", "not run: ")), finished
    assert set(results) <= set(last_finished(client))  # nothing the editor never heard of


@pytest.mark.parametrize(("fault", "after"), CASES)
async def test_a_broken_stream_is_retried_and_what_it_showed_is_taken_back(
        client, scripted, workspace, fault, after):
    scripted.add_scenario("s", {"steps": [
        {"content": BROKEN, "chunk": 4, "fault": {**fault, "afterEvents": after}},
        RETRIED, DONE]})
    sid = await new_session(client, workspace, "s")
    result = await turn(client, sid)
    assert result["reason"] == "completed" and result["text"] == "Done."
    requests = scripted.requests_for("s")
    assert len(requests) == 3  # the broken one, its retry, the one after the tool ran
    assert requests[1].body["messages"] == requests[0].body["messages"]  # the same again
    (retry,) = client.turn_events("retry")
    assert (retry["attempt"], retry["maxAttempts"]) == (2, 5)
    assert retry["error"]["code"] == ("overloaded" if "errorEvent" in fault
                                      else "streamInterrupted")
    calls = [c["index"] for c in client.turn_events("modelCall")]
    tombstones = client.turn_events("tombstone")
    if after == 1:  # nothing of the response had arrived: nothing to take back
        assert tombstones == [] and calls == [0, 1]
    else:
        assert [t["index"] for t in tombstones] == [0] and calls == [0, 1, 2]
        assert "broke off" in tombstones[0]["reason"]
        kinds = [e["kind"] for e in client.turn_events()]
        gone = kinds.index("tombstone")  # then the new model call, then the wait before it
        assert kinds.index("modelCall", gone) < kinds.index("retry")
    shown = "".join(e["text"] for e in client.turn_events("textDelta"))
    assert shown.endswith("Reading it now.Done.")
    # the model's view: the retried response and its one Read, nothing of the broken one
    assistant = requests[2].body["messages"][-2]
    assert [b.get("text") for b in assistant["content"]][0] == "Reading it now."
    assert len(results_in(requests[2])) == 1
    assert_editor_and_model_agree(client, requests)
    finished = last_finished(client)
    assert [f["status"] for f in finished.values()].count("ok") == 1  # the retried Read
    started = client.turn_events("toolCallStarted")
    assert len(started) == len(finished)  # every call the editor saw has ended
    if after >= 21:  # a Read of the broken response had started (and maybe finished)
        assert len(started) == 3
        dropped = [f for f in finished.values() if f["status"] == "cancelled"]
        assert len(dropped) == 2
        assert any(f["summary"].startswith("discarded: ") for f in dropped)


async def test_retries_are_bounded_and_the_last_failure_ends_the_turn(client, scripted,
                                                                      workspace):
    scripted.add_scenario("s", {"steps": [
        {"content": BROKEN, "chunk": 4,
         "fault": {"errorEvent": "api_error", "afterEvents": 21, "times": 5}}, DONE]})
    sid = await new_session(client, workspace, "s")
    result = await turn(client, sid)
    assert (result["reason"], result["error"]["code"]) == ("modelError", "serverError")
    assert result["error"]["retryable"] is True
    assert len(scripted.requests_for("s")) == 5  # maxAttempts, not one more
    billed = sum(r.cache.usage()["cache_creation_input_tokens"] + r.cache.usage()[
        "cache_read_input_tokens"] + r.cache.usage()["input_tokens"]
                 for r in scripted.requests_for("s"))
    u = result["usage"]  # each broke off after its message_start: the call failed, still billed
    assert u.get("inputTokens", 0) + u.get("cacheReadInputTokens", 0) + u.get(
        "cacheCreationInputTokens", 0) == billed > 0
    retries = client.turn_events("retry")
    assert [(r["attempt"], r["maxAttempts"]) for r in retries] == [(2, 5), (3, 5), (4, 5),
                                                                   (5, 5)]
    assert [t["index"] for t in client.turn_events("tombstone")] == [0, 1, 2, 3]
    # the last attempt's output stays: its text so far and its complete Read, answered
    again = await turn(client, sid, "try again")
    assert again["reason"] == "completed"
    requests = scripted.requests_for("s")
    kept = requests[-1].body["messages"][1]
    assert kept["content"][0] == {"type": "text", "text": "Reading both files now."}
    assert [b["input"] for b in kept["content"] if b["type"] == "tool_use"] == [
        {"path": "app.py"}]
    assert_editor_and_model_agree(client, requests)


async def test_a_read_only_call_still_running_when_the_stream_breaks_is_stopped(
        client, scripted, workspace):
    """A Grep of a named pipe nobody writes blocks until stopped: the break must stop it, and
    the editor must be told it was discarded, as the model (which never sees it) would be."""
    os.mkfifo(workspace / "pipe")
    scripted.add_scenario("s", {"steps": [
        {"content": [{"type": "tool_use", "name": "Grep",
                      "input": {"pattern": "x", "path": "pipe"}},
                     {"type": "text", "text": "Waiting for the pipe to say something."}],
         "chunk": 4, "fault": {"drop": True, "afterEvents": 16}},
        DONE]})
    sid = await new_session(client, workspace, "s")
    result = await turn(client, sid)
    assert result["reason"] == "completed" and result["text"] == "Done."
    (finished,) = client.turn_events("toolCallFinished")
    assert finished["tool"] == "Grep" and finished["status"] == "cancelled"
    assert finished["summary"] == ("discarded: the model's response broke off and is being "
                                   "written again")
    requests = scripted.requests_for("s")
    assert len(requests) == 2 and tool_uses(requests) == set()


async def test_a_failed_response_answers_a_stopped_call_as_the_editor_was_told(
        client, scripted, workspace):
    """Not retried (an invalid request): the running Grep is stopped, and the next request
    tells the model what the editor was told."""
    os.mkfifo(workspace / "pipe")
    scripted.add_scenario("s", {"steps": [
        {"content": [{"type": "tool_use", "name": "Grep",
                      "input": {"pattern": "x", "path": "pipe"}},
                     {"type": "text", "text": "Waiting for the pipe to say something."}],
         "chunk": 4, "fault": {"errorEvent": "invalid_request_error", "afterEvents": 16}},
        DONE]})
    sid = await new_session(client, workspace, "s")
    failed = await turn(client, sid)
    assert (failed["reason"], failed["error"]["code"]) == ("modelError", "invalidRequest")
    assert "retryable" not in failed["error"]  # omitted: false
    (finished,) = client.turn_events("toolCallFinished")
    assert (finished["status"], finished["summary"]) == (
        "cancelled", "discarded: the model's response failed")
    await turn(client, sid, "try again")
    requests = scripted.requests_for("s")
    assert len(requests) == 2
    (result,) = results_in(requests[1]).values()
    assert result["is_error"] is True
    assert result["content"] == ("This tool call's result was discarded: the model's "
                                 "response failed.")
    # the text shown up to the break is what the model is given back
    shown = "".join(e["text"] for e in client.turn_events("textDelta"))
    assistant = requests[1].body["messages"][1]["content"]
    assert shown.startswith(assistant[-1]["text"]) and assistant[-1]["text"]
    assert_editor_and_model_agree(client, requests)


async def test_a_call_that_finished_before_the_break_is_reported_again(daemon_env,
                                                                       daemon_command,
                                                                       scripted, workspace):
    """The stream stalls after the first Read's block (event 17): the Read finishes `ok` during
    the stall, then the read timeout breaks the stream. The model never sees that Read, so the
    editor is told again: `cancelled`, its result discarded."""
    scripted.add_scenario("s", {"steps": [
        {"content": BROKEN, "chunk": 4, "fault": {"stall": 30, "afterEvents": 18}},
        {"content": [{"type": "text", "text": "Nothing to read after all."}]}]})
    c = await lsp.start(dict(daemon_env, HEDDLE_READ_TIMEOUT="3"), daemon_command)
    try:
        sid = await new_session(c, workspace, "s")
        result = await turn(c, sid)
    finally:
        await lsp.stop(c)
    assert result["reason"] == "completed"
    events = c.turn_events()
    finished = [(i, e) for i, e in enumerate(events) if e["kind"] == "toolCallFinished"]
    gone = next(i for i, e in enumerate(events) if e["kind"] == "tombstone")
    assert [(e["status"], i < gone) for i, e in finished] == [("ok", True), ("cancelled", True)]
    assert finished[0][1]["toolCallId"] == finished[1][1]["toolCallId"]
    assert finished[1][1]["summary"].startswith("discarded: ")
    (retry,) = c.turn_events("retry")
    assert retry["error"]["code"] == "timeout"
    requests = scripted.requests_for("s")
    assert len(requests) == 2 and tool_uses(requests) == set()
    assert_editor_and_model_agree(c, requests)


async def test_a_discarded_call_waiting_for_permission_gets_its_answer_first(
        daemon_env, daemon_command, scripted, workspace, tmp_path):
    """An ask rule makes the first Read wait for the editor, which never answers; the stream
    stalls until the read timeout breaks it. The prompt is answered `cancelled` before the
    call's toolCallFinished, as for every prompt, and both before the tombstone."""
    settings = tmp_path / "config" / "heddle" / "settings.toml"
    settings.parent.mkdir(parents=True)
    settings.write_text('[permissions]\nask = ["Read(app.py)"]\n')
    scripted.add_scenario("s", {"steps": [
        {"content": BROKEN, "chunk": 4, "fault": {"stall": 30, "afterEvents": 18}}, DONE]})
    never = asyncio.Event()
    c = await lsp.start(dict(daemon_env, HEDDLE_READ_TIMEOUT="3"), daemon_command)
    try:
        c.answer = lambda params: never.wait()
        sid = await new_session(c, workspace, "s")
        result = await turn(c, sid)
    finally:
        never.set()
        await lsp.stop(c)
    assert result["reason"] == "completed" and result["text"] == "Done."
    about = [(e["kind"], e.get("decision"), e.get("status")) for e in c.turn_events()
             if e["kind"] in ("permissionAsked", "permissionAnswered", "toolCallFinished",
                              "tombstone")]
    assert about == [("permissionAsked", None, None), ("permissionAnswered", "cancelled", None),
                     ("toolCallFinished", None, "cancelled"), ("tombstone", None, None)]
    (answered,) = c.turn_events("permissionAnswered")
    assert answered["reason"].startswith("the call was discarded: ")
    assert_editor_and_model_agree(c, scripted.requests_for("s"))


def output_tokens(content: list[dict]) -> int:
    """What the scripted server reports a response's output as: ceil(characters / 4)."""
    chars = sum(len(b["text"]) if b["type"] == "text" else
                len(json.dumps(b["input"], separators=(",", ":"))) for b in content)
    return -(-chars // 4)


async def test_the_tokens_of_responses_that_broke_off_count_in_the_usage(client, scripted,
                                                                         workspace):
    """A broken response is billed for what it reported: the input its message_start gave (it
    broke off mid-body), and its output too when message_delta came (it ended without
    message_stop). The turn's usage counts every request."""
    scripted.add_scenario("s", {"steps": [
        {"content": BROKEN, "chunk": 4, "fault": {"drop": True, "afterEvents": 21}},
        {"content": BROKEN, "chunk": 4, "fault": {"endEarly": True, "afterEvents": 99}},
        RETRIED, DONE]})
    sid = await new_session(client, workspace, "s")
    result = await turn(client, sid)
    assert result["reason"] == "completed"
    requests = scripted.requests_for("s")
    assert len(requests) == 4 and all(r.cache is not None for r in requests)
    usage = result["usage"]
    for field, key in (("inputTokens", "input_tokens"),
                       ("cacheReadInputTokens", "cache_read_input_tokens"),
                       ("cacheCreationInputTokens", "cache_creation_input_tokens")):
        assert usage.get(field, 0) == sum(r.cache.usage()[key] for r in requests), field
    assert usage["outputTokens"] == (output_tokens(BROKEN) + output_tokens(RETRIED["content"])
                                     + output_tokens(DONE["content"]))
    assert usage["modelCalls"] == 4
    last = client.turn_events("usage")[-1]["usage"]
    assert last == usage  # the meter says the same
