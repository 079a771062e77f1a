"""Compaction notices (`compaction_update`): sent live and replayed by `session/load` to a
client that declared `session.compaction`, and never to one that did not."""

from __future__ import annotations

import asyncio

import pytest
from acp import RequestError, text_block

from acp_harness import Recorder, agent

TOO_LONG = {"fault": {"status": 413}}
SUMMARY = "Goal: greet the user."
RECOVERED = {"content": [{"type": "text", "text": "Recovered."}]}


def reactive(scripted) -> None:
    """A turn whose first call is too long: the loop compacts the conversation, then answers."""
    scripted.add_scenario("reactive", {"steps": [
        TOO_LONG, {"content": [{"type": "text", "text": SUMMARY}]}, RECOVERED]})


async def test_a_compaction_in_a_turn_is_shown_live_and_replayed(scripted, daemon_env, workspace):
    reactive(scripted)
    env = {**daemon_env, "HEDDLE_MODEL": "reactive"}
    live = Recorder()
    async with agent(env, workspace, live, compaction=True) as (conn, _, _):
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        result = await asyncio.wait_for(conn.prompt(session_id=sid,
                                                    prompt=[text_block("please say hi")]), 30)
    assert result.stop_reason == "end_turn"
    started, done = live.raw_of("compaction_update")
    assert started["status"] == "in_progress" and "summary" not in started
    assert done["compactionId"] == started["compactionId"]
    assert done["status"] == "completed"
    assert done["summary"] == [{"type": "text", "text": SUMMARY}]
    assert done["_meta"]["heddle"]["tokensAfter"] >= 0
    kinds = [u["sessionUpdate"] for u in live.raw]
    assert kinds.index("compaction_update") < kinds.index("agent_message_chunk")
    assert live.text() == "Recovered."

    replayed = Recorder()
    async with agent(env, workspace, replayed, compaction=True) as (conn, _, _):
        await asyncio.wait_for(conn.load_session(cwd=str(workspace), session_id=sid,
                                                 mcp_servers=[]), 30)
    kinds = [u["sessionUpdate"] for u in replayed.raw]
    assert kinds.index("user_message_chunk") < kinds.index("compaction_update") \
        < kinds.index("agent_message_chunk")
    (again,) = replayed.raw_of("compaction_update")
    assert again["status"] == "completed"
    assert again["summary"] == [{"type": "text", "text": SUMMARY}]


async def test_without_the_capability_no_compaction_update_is_sent(scripted, daemon_env,
                                                                  workspace):
    reactive(scripted)
    env = {**daemon_env, "HEDDLE_MODEL": "reactive"}
    live = Recorder()
    async with agent(env, workspace, live) as (conn, _, _):
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        result = await asyncio.wait_for(conn.prompt(session_id=sid,
                                                    prompt=[text_block("please say hi")]), 30)
    assert result.stop_reason == "end_turn" and live.text() == "Recovered."
    assert len(scripted.requests_for("reactive")) == 3  # it did compact
    replayed = Recorder()
    async with agent(env, workspace, replayed) as (conn, _, _):
        await asyncio.wait_for(conn.load_session(cwd=str(workspace), session_id=sid,
                                                 mcp_servers=[]), 30)
    assert replayed.text() == "Recovered."
    for client in (live, replayed):
        assert [u for u in client.raw if u["sessionUpdate"].startswith("compaction")] == []


async def test_a_failed_compaction_is_reported_failed(scripted, daemon_env, workspace):
    scripted.add_scenario("broken", {"steps": [TOO_LONG, {"fault": {"status": 400}}]})
    client = Recorder()
    env = {**daemon_env, "HEDDLE_MODEL": "broken"}
    async with agent(env, workspace, client, compaction=True) as (conn, _, _):
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        result = await asyncio.wait_for(conn.prompt(session_id=sid,
                                                    prompt=[text_block("hi")]), 30)
    assert result.stop_reason == "max_tokens"  # the prompt stayed too long
    started, failed = client.raw_of("compaction_update")
    assert (started["status"], failed["status"]) == ("in_progress", "failed")
    assert failed["compactionId"] == started["compactionId"]
    assert failed["error"] and "summary" not in failed


def chat(scripted, summary_step: dict) -> None:
    scripted.add_scenario("chat", {"steps": [
        {"content": [{"type": "text", "text": "First answer. " * 50}]},
        {"content": [{"type": "text", "text": "Second answer. " * 50}]},
        {"content": [{"type": "text", "text": "Third answer. " * 50}]},
        summary_step]})


async def three_turns(conn, workspace) -> str:
    """A new session with three prompts answered (something to compact); its id."""
    sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
    for word in ("one", "two", "three"):
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block(word)]), 30)
    return sid


async def test_compact_command_is_a_compaction_live_and_in_replay(scripted, daemon_env,
                                                                  workspace):
    chat(scripted, {"content": [{"type": "text", "text": "<summary>We chatted.</summary>"}]})
    client = Recorder()
    env = {**daemon_env, "HEDDLE_MODEL": "chat"}
    async with agent(env, workspace, client, compaction=True) as (conn, _, _):
        sid = await three_turns(conn, workspace)
        client.updates.clear()
        client.raw.clear()
        result = await asyncio.wait_for(conn.prompt(session_id=sid,
                                                    prompt=[text_block("/compact")]), 30)
    assert result.stop_reason == "end_turn"
    assert [u["status"] for u in client.raw_of("compaction_update")] == ["in_progress",
                                                                         "completed"]
    done = client.raw_of("compaction_update")[-1]
    assert "We chatted." in done["summary"][0]["text"]
    before, after = (done["_meta"]["heddle"][k] for k in ("tokensBefore", "tokensAfter"))
    assert after < before
    assert client.of("agent_message_chunk") == []  # the update is the answer, not a message

    replayed = Recorder()
    async with agent(env, workspace, replayed, compaction=True) as (conn, _, _):
        await asyncio.wait_for(conn.load_session(cwd=str(workspace), session_id=sid,
                                                 mcp_servers=[]), 30)
    shown = [u for u in replayed.raw if u["sessionUpdate"] != "available_commands_update"]
    assert [u["sessionUpdate"] for u in shown].count("compaction_update") == 1
    assert shown[-1]["sessionUpdate"] == "compaction_update"  # after the turns, where it was
    text = [u for u in shown if u["sessionUpdate"] == "agent_message_chunk"]
    assert shown.index(text[-1]) < len(shown) - 1 and "Third answer." in text[-1]["content"]["text"]
    assert "We chatted." in shown[-1]["summary"][0]["text"]


async def test_cancel_during_compact_reports_it_cancelled(scripted, daemon_env, workspace):
    chat(scripted, {"content": [{"type": "text", "text": "<summary>" + "slow " * 200}],
                    "chunk": 4, "delayMs": 100})
    client = Recorder()
    env = {**daemon_env, "HEDDLE_MODEL": "chat"}
    async with agent(env, workspace, client, compaction=True) as (conn, _, _):
        sid = await three_turns(conn, workspace)
        compacting = asyncio.ensure_future(conn.prompt(session_id=sid,
                                                       prompt=[text_block("/compact")]))
        await client.wait_raw("compaction_update")
        with pytest.raises(RequestError) as busy:  # one thing at a time replaces the history
            await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("four")]), 30)
        assert busy.value.code == -32001
        await conn.cancel(session_id=sid)
        result = await asyncio.wait_for(compacting, 30)
    assert result.stop_reason == "cancelled"
    started, cancelled = client.raw_of("compaction_update")
    assert (started["status"], cancelled["status"]) == ("in_progress", "cancelled")
    assert cancelled["compactionId"] == started["compactionId"]


async def test_a_later_initialize_is_read_for_the_capability_too(scripted, daemon_env,
                                                                 workspace):
    reactive(scripted)
    client = Recorder()
    env = {**daemon_env, "HEDDLE_MODEL": "reactive"}
    async with agent(env, workspace, client) as (conn, _, _):  # answered while loading
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        # the SDK answers this one (its schema drops `session.compaction`)
        await asyncio.wait_for(conn._conn.send_request("initialize", {
            "protocolVersion": 1, "clientCapabilities": {"session": {"compaction": {}}}}), 30)
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("hi")]), 30)
    assert [u["status"] for u in client.raw_of("compaction_update")] == ["in_progress",
                                                                         "completed"]
