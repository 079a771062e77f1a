"""The repeat guard through `heddle acp`: the notice as an agent message, the question as
`session/request_permission` (go on / stop), and the stop reason."""

from __future__ import annotations

import asyncio

from acp import text_block

from acp_harness import Recorder, agent

GREP = {"type": "tool_use", "name": "Grep", "input": {"pattern": "no_such_text_anywhere"}}
NOTICE = ("**Heddle is repeating itself: the agent made the same Grep call 4 times in a row "
          "with the same result.**")


def scenario(*after: dict) -> dict:
    return {"steps": [{"content": [GREP]}] * 4 + list(after)}


async def prompt(daemon_env, workspace, client: Recorder, model: str, mode: str | None = None):
    async with agent({**daemon_env, "HEDDLE_MODEL": model}, workspace, client) as (conn, _, _):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        if mode:
            await conn.set_session_mode(session_id=session.session_id, mode_id=mode)
        return await asyncio.wait_for(conn.prompt(session_id=session.session_id,
                                                  prompt=[text_block("find it")]), 90)


async def test_the_user_lets_it_go_on(scripted, daemon_env, workspace):
    scripted.add_scenario("loop-on", scenario({
        "match": {"lastUserContains": "let the turn go on"},
        "content": [{"type": "text", "text": "Trying another way."}]}))
    client = Recorder()
    result = await prompt(daemon_env, workspace, client, "loop-on")

    assert result.stop_reason == "end_turn"
    (asked,) = client.permissions
    assert asked["options"] == ["allow_once", "reject_once"]
    refused = list(client.calls())[3]
    assert asked["toolCall"]["toolCallId"] == refused
    assert asked["toolCall"]["title"].startswith("Heddle is repeating itself: the agent made")
    assert "status" not in asked["toolCall"]  # the refused call stays as it ended
    assert client.calls()[refused]["status"] == "failed"
    assert NOTICE in client.text() and client.text().endswith("Trying another way.")


async def test_the_user_stops_the_turn(scripted, daemon_env, workspace):
    scripted.add_scenario("loop-stop", scenario())
    client = Recorder()
    client.answers = ["reject_once"]
    result = await prompt(daemon_env, workspace, client, "loop-stop")

    assert result.stop_reason == "end_turn"
    assert len(scripted.requests_for("loop-stop")) == 4
    assert client.text().endswith(
        NOTICE + "\n\n**The turn ended: the agent made the same Grep call 4 times in a row with "
        "the same result; the turn was stopped.**\n")


async def test_bypass_mode_ends_the_turn_without_asking(scripted, daemon_env, workspace):
    scripted.add_scenario("loop-bypass", scenario())
    client = Recorder()
    result = await prompt(daemon_env, workspace, client, "loop-bypass", "bypassPermissions")

    assert result.stop_reason == "end_turn"
    assert client.permissions == []
    assert "the turn ends (bypassPermissions mode does not ask)" in client.text()
