"""Every `permissionAsked` gets its `permissionAnswered`, before the call's `toolCallFinished`,
however the prompt closes: turn/cancel, $/cancelRequest of the turn/start, a turn that
interrupts it, shutdown, or HEDDLE_PERMISSION_TIMEOUT."""

from __future__ import annotations

import asyncio

import pytest
from lsprotocol import types as lsp_types

from e2e import lsp
from e2e.test_turns import new_session

AFTER = {"content": [{"type": "text", "text": "Continuing."}]}
BASH = {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": "touch ran"}}]}


def call_events(events: list[dict], call_id: str) -> list[tuple[str, str | None]]:
    """(kind, decision or status) of one call's permission and finish events, in order."""
    return [(e["kind"], e.get("decision") or e.get("status")) for e in events
            if e.get("toolCallId") == call_id
            and e["kind"] in ("permissionAsked", "permissionAnswered", "toolCallFinished")]


@pytest.fixture
async def never():
    """What the user's answer waits for: nothing, until the test ends."""
    future = asyncio.get_running_loop().create_future()
    yield future
    future.cancel()


def hold_prompts(client, never: asyncio.Future) -> asyncio.Event:
    """The user never answers; the returned event is set once a prompt is open."""
    asked = asyncio.Event()

    async def hold(params):
        asked.set()
        return await never

    client.answer = hold
    return asked


async def cancel_by_turn_cancel(client, sid, msg_id):
    client.protocol.notify("turn/cancel", {"sessionId": sid})


async def cancel_by_cancel_request(client, sid, msg_id):
    client.protocol.notify("$/cancelRequest", lsp_types.CancelParams(id=msg_id))


async def cancel_by_interrupting_turn(client, sid, msg_id):
    client.answer = lambda params: {"decision": "allowOnce"}
    result = await client.call("turn/start", {"sessionId": sid, "prompt": "never mind",
                                              "ifBusy": "interrupt"})
    assert result["reason"] == "completed"


@pytest.mark.parametrize("cancel", [cancel_by_turn_cancel, cancel_by_cancel_request,
                                    cancel_by_interrupting_turn])
async def test_a_cancelled_prompt_is_answered_cancelled_before_the_call_finishes(
        client, scripted, workspace, never, cancel):
    scripted.add_scenario("p", {"steps": [BASH, AFTER]})
    asked = hold_prompts(client, never)
    sid = await new_session(client, workspace, "p")
    turn = asyncio.ensure_future(client.protocol.send_request_async(
        "turn/start", {"sessionId": sid, "prompt": "go"}, msg_id=777))
    await asyncio.wait_for(asked.wait(), 30)

    await cancel(client, sid, 777)
    result = await asyncio.wait_for(turn, 10)

    assert (result["reason"], result["cancelPhase"]) == ("cancelled", "tools")
    call_id = client.turn_events("permissionAsked")[0]["toolCallId"]
    assert call_events(client.turn_events(), call_id) == [
        ("permissionAsked", None), ("permissionAnswered", "cancelled"),
        ("toolCallFinished", "cancelled")]
    answered = client.turn_events("permissionAnswered")[0]
    assert answered["reason"] == "the turn was cancelled"
    assert not (workspace / "ran").exists()
    assert lsp.seqs_contiguous(client)


async def test_shutdown_with_a_prompt_open_answers_it_cancelled(daemon_env, daemon_command,
                                                                scripted, workspace, never):
    scripted.add_scenario("p", {"steps": [BASH]})
    c = await lsp.start(daemon_env, daemon_command)
    try:
        asked = hold_prompts(c, never)
        sid = await new_session(c, workspace, "p")
        turn = asyncio.ensure_future(c.call("turn/start", {"sessionId": sid, "prompt": "go"}))
        await asyncio.wait_for(asked.wait(), 30)
        await asyncio.wait_for(c.shutdown_session(), 10)
        assert (await asyncio.wait_for(turn, 10))["reason"] == "cancelled"
    finally:
        await c.stop()
    call_id = c.turn_events("permissionAsked")[0]["toolCallId"]
    assert call_events(c.turn_events(), call_id) == [
        ("permissionAsked", None), ("permissionAnswered", "cancelled"),
        ("toolCallFinished", "cancelled")]


async def test_a_sub_agents_open_prompt_is_answered_cancelled_too(client, scripted, workspace,
                                                                  never):
    (workspace / ".heddle").mkdir()
    (workspace / ".heddle/settings.toml").write_text('[permissions]\nask = ["Read(app.py)"]\n')
    scripted.add_scenario("m", {"steps": [
        {"content": [{"type": "tool_use", "name": "Task", "input": {
            "description": "look", "prompt": "Read app.py"}}]},
        {"match": {"lastUserContains": "Read app.py"},
         "content": [{"type": "tool_use", "name": "Read", "input": {"path": "app.py"}}]},
        AFTER]})
    asked = hold_prompts(client, never)
    sid = await new_session(client, workspace, "m")
    turn = asyncio.ensure_future(client.call("turn/start", {"sessionId": sid, "prompt": "go"}))
    await asyncio.wait_for(asked.wait(), 30)
    client.protocol.notify("turn/cancel", {"sessionId": sid})
    assert (await asyncio.wait_for(turn, 10))["reason"] == "cancelled"

    nested = [n["event"] for n in client.turn_events("agent")]
    read_id = next(e["toolCallId"] for e in nested if e["kind"] == "permissionAsked")
    assert call_events(nested, read_id)[:2] == [("permissionAsked", None),
                                               ("permissionAnswered", "cancelled")]
    task_id = client.turn_events("toolCallInput")[0]["toolCallId"]
    assert call_events(client.turn_events(), task_id) == [("toolCallFinished", "cancelled")]


async def test_a_timed_out_prompt_is_answered_before_the_call_finishes(daemon_env, daemon_command,
                                                                       scripted, workspace, never):
    scripted.add_scenario("p", {"steps": [BASH, AFTER]})
    c = await lsp.start(dict(daemon_env, HEDDLE_PERMISSION_TIMEOUT="0.3"), daemon_command)
    try:
        hold_prompts(c, never)
        sid = await new_session(c, workspace, "p")
        result = await c.call("turn/start", {"sessionId": sid, "prompt": "go"})
    finally:
        await lsp.stop(c)
    assert result["reason"] == "completed"
    call_id = c.turn_events("permissionAsked")[0]["toolCallId"]
    assert call_events(c.turn_events(), call_id) == [
        ("permissionAsked", None), ("permissionAnswered", "reject"),
        ("toolCallFinished", "rejected")]
    assert c.turn_events("permissionAnswered")[0]["reason"] == "no answer within 0.3 s"
