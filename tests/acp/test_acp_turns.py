"""`heddle acp` end to end through the ACP SDK's client: initialize, sessions, prompts and what
they stream, permissions, modes."""

from __future__ import annotations

import asyncio
import time

import pytest
from acp import RequestError, text_block
from acp.helpers import embedded_text_resource, resource_block, resource_link_block

from acp_harness import Recorder, agent
from heddle.rpc.emitter import FLUSH_DELAY


def read_then_edit() -> dict:
    return {"steps": [
        {"content": [{"type": "thinking", "thinking": "The greeting is built with +.",
                      "signature": "s1"},
                     {"type": "text", "text": "Let me look at the code."},
                     {"type": "tool_use", "name": "Read", "input": {"path": "app.py"}}]},
        {"match": {"lastUserContains": "return 'Hello, ' + name"},
         "content": [{"type": "tool_use", "name": "Edit", "input": {
             "path": "app.py", "old_string": "'Hello, ' + name",
             "new_string": "f'Hello, {name}!'"}}]},
        {"content": [{"type": "text", "text": "I switched greet to an f-string."}]},
    ]}


async def test_initialize_is_honest(daemon_env, workspace):
    async with agent(daemon_env, workspace) as (conn, _, init):
        # the first is answered while the SDK loads, a later one by the agent: the same
        again = await conn.initialize(protocol_version=1)
        assert again == init
        caps = init.agent_capabilities
        assert init.protocol_version == 1
        assert init.agent_info.name == "heddle"
        assert caps.load_session is True
        assert caps.prompt_capabilities.embedded_context is True
        assert caps.prompt_capabilities.image is False
        assert caps.mcp_capabilities.http is True and caps.mcp_capabilities.sse is False
        assert caps.session_capabilities.list is not None
        assert init.auth_methods == []  # a key is in the environment


@pytest.mark.parametrize("left", [{}, {"ANTHROPIC_AUTH_TOKEN": "t", "ANTHROPIC_BASE_URL": " "}],
                         ids=["nothing", "a token the model client does not use"])
async def test_without_a_key_an_auth_method_says_what_to_set(daemon_env, workspace, left):
    env = {k: v for k, v in daemon_env.items() if not k.startswith("ANTHROPIC_")} | left
    async with agent(env, workspace) as (conn, _, init):
        [method] = init.auth_methods
        assert "ANTHROPIC_API_KEY" in method.description
        with pytest.raises(RequestError) as err:
            await conn.new_session(cwd=str(workspace), mcp_servers=[])
        assert err.value.code == -32000 and "ANTHROPIC_API_KEY" in str(err.value)
        with pytest.raises(RequestError):
            await conn.authenticate(method_id=method.id)


async def test_read_and_edit_with_a_permission(scripted, daemon_env, workspace):
    scripted.add_scenario("edit", read_then_edit())
    client = Recorder()
    async with agent({**daemon_env, "HEDDLE_MODEL": "edit"}, workspace, client) as (conn, _, _):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        assert session.modes.current_mode_id == "default"
        assert [m.id for m in session.modes.available_modes] == [
            "default", "acceptEdits", "plan", "bypassPermissions"]
        result = await asyncio.wait_for(conn.prompt(session_id=session.session_id,
                                                    prompt=[text_block("Use an f-string")]), 30)

    assert result.stop_reason == "end_turn"
    assert result.usage.output_tokens > 0
    assert "f'Hello, {name}!'" in (workspace / "app.py").read_text()
    assert client.text() == "Let me look at the code.I switched greet to an f-string."
    assert client.text("agent_thought_chunk") == "The greeting is built with +."
    calls = list(client.calls().values())
    read, edit = calls
    assert read["kind"] == "read" and read["status"] == "completed"
    assert read["locations"] == [{"path": str(workspace / "app.py")}]
    assert edit["kind"] == "edit" and edit["status"] == "completed"
    assert edit["content"][0] == {"type": "diff", "path": str(workspace / "app.py"),
                                  "oldText": "'Hello, ' + name", "newText": "f'Hello, {name}!'"}
    [asked] = client.permissions
    assert asked["options"] == ["allow_once", "allow_always", "reject_once", "reject_always"]
    diff = asked["toolCall"]["content"][0]
    assert diff["type"] == "diff" and "+ name" in diff["oldText"] and "{name}!" in diff["newText"]
    assert "available_commands_update" in client.kinds()


async def test_text_is_coalesced_as_on_heddles_protocol(scripted, daemon_env, workspace):
    # 300 deltas 3 ms apart: they reach the daemon one by one (none merged on the way in), so
    # only the emitter's merging (16 ms, 4 KiB) makes fewer chunks than deltas
    answer = "".join(f"w{n:03d} tok " for n in range(300))
    scripted.add_scenario("paced", {"steps": [
        {"content": [{"type": "text", "text": "Warm."}]},
        {"content": [{"type": "text", "text": answer}], "chunk": 10, "delayMs": 3}]})
    client = Recorder()
    async with agent({**daemon_env, "HEDDLE_MODEL": "paced"}, workspace, client) as (conn, _, _):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        # the first prompt pays for starting the model client: the timed one streams at once
        await asyncio.wait_for(conn.prompt(session_id=session.session_id,
                                           prompt=[text_block("Warm up")]), 30)
        client.updates.clear()
        started = time.monotonic()
        await asyncio.wait_for(conn.prompt(session_id=session.session_id,
                                           prompt=[text_block("Talk")]), 30)
        elapsed = time.monotonic() - started
    chunks = client.of("agent_message_chunk")
    assert client.text() == answer
    # at most one per FLUSH_DELAY, and the last (one per delta would be 300), in the time the
    # answer took: about 1 s, which a loaded machine may stretch
    assert len(chunks) <= 2 + elapsed / FLUSH_DELAY, (len(chunks), elapsed)


async def test_resources_become_context(scripted, daemon_env, workspace):
    scripted.add_scenario("ctx", {"steps": [
        {"match": {"lastUserContains": "SECRET-SELECTION"},
         "content": [{"type": "text", "text": "Seen."}]}]})
    async with agent({**daemon_env, "HEDDLE_MODEL": "ctx"}, workspace) as (conn, _, _):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        link = resource_link_block("README.md", (workspace / "README.md").as_uri())
        embedded = resource_block(embedded_text_resource((workspace / "app.py").as_uri(),
                                                         "SECRET-SELECTION"))
        result = await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[
            text_block("What is this?"), link, embedded]), 30)
    assert result.stop_reason == "end_turn"
    sent = scripted.requests_for("ctx")[0].body["messages"][-1]["content"][-1]["text"]
    assert f"- {workspace / 'README.md'}\n" in sent
    assert f"- {workspace / 'app.py'}:\n```\nSECRET-SELECTION\n```" in sent
    assert sent.endswith("What is this?")


async def test_reject_always_becomes_a_session_deny_rule(scripted, daemon_env, workspace):
    edit = {"type": "tool_use", "name": "Edit", "input": {
        "path": "app.py", "old_string": "'Hello, ' + name", "new_string": "'Hi, ' + name"}}
    scripted.add_scenario("deny", {"steps": [
        {"content": [edit]}, {"content": [{"type": "text", "text": "Rejected."}]},
        {"content": [edit]}, {"content": [{"type": "text", "text": "Denied again."}]}]})
    client = Recorder()
    client.answers = ["reject_always"]
    async with agent({**daemon_env, "HEDDLE_MODEL": "deny"}, workspace, client) as (conn, _, _):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        for _ in range(2):
            await asyncio.wait_for(conn.prompt(session_id=session.session_id,
                                               prompt=[text_block("Say hi")]), 30)
    assert len(client.permissions) == 1  # the second edit met the deny rule, nobody was asked
    assert [c["status"] for c in client.calls().values()] == ["failed", "failed"]
    assert "'Hello, ' + name" in (workspace / "app.py").read_text()


async def test_modes_change_the_policy(scripted, daemon_env, workspace):
    edit = {"type": "tool_use", "name": "Write", "input": {"path": "new.txt", "content": "x\n"}}
    scripted.add_scenario("modes", {"steps": [
        {"content": [edit]}, {"content": [{"type": "text", "text": "Planned."}]},
        {"content": [edit]}, {"content": [{"type": "text", "text": "Written."}]}]})
    client = Recorder()
    async with agent({**daemon_env, "HEDDLE_MODEL": "modes"}, workspace, client) as (conn, _, _):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        sid = session.session_id
        await conn.set_session_mode(session_id=sid, mode_id="plan")
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("Plan")]), 30)
        assert not (workspace / "new.txt").exists()
        await conn.set_session_mode(session_id=sid, mode_id="acceptEdits")
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("Do")]), 30)
        with pytest.raises(RequestError) as err:
            await conn.set_session_mode(session_id=sid, mode_id="yolo")
        assert err.value.code == -32602 and "yolo" in str(err.value)
    assert (workspace / "new.txt").read_text() == "x\n"
    assert client.permissions == []  # plan refused it, acceptEdits allowed it
    assert [u["currentModeId"] for u in client.of("current_mode_update")] == [
        "plan", "acceptEdits"]
    first, second = client.calls().values()
    assert first["status"] == "failed" and second["status"] == "completed"


async def test_plan_from_todowrite_and_usage(scripted, daemon_env, workspace):
    todos = [{"content": "Read the code", "status": "completed"},
             {"content": "Fix greet", "status": "in_progress", "active_form": "Fixing greet"}]
    scripted.add_scenario("todo", {"steps": [
        {"content": [{"type": "tool_use", "name": "TodoWrite", "input": {"todos": todos}}]},
        {"content": [{"type": "text", "text": "Planned."}]}]})
    client = Recorder()
    async with agent({**daemon_env, "HEDDLE_MODEL": "todo"}, workspace, client) as (conn, _, _):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        await asyncio.wait_for(conn.prompt(session_id=session.session_id,
                                           prompt=[text_block("Plan it")]), 30)
    [plan] = client.of("plan")
    assert [(e["content"], e["status"]) for e in plan["entries"]] == [
        ("Read the code", "completed"), ("Fix greet", "in_progress")]
    usage = client.of("usage_update")
    assert usage and usage[-1]["size"] == 200000 and usage[-1]["used"] > 0


PLAN = "# Add notes\n\n1. Write new.txt"


async def test_a_plan_is_a_permission_request_and_its_approval_a_mode_update(
        scripted, daemon_env, workspace):
    plan = {"type": "tool_use", "name": "PresentPlan", "input": {"plan": PLAN}}
    write = {"type": "tool_use", "name": "Write", "input": {"path": "new.txt", "content": "x\n"}}
    scripted.add_scenario("planned", {"steps": [
        {"content": [plan]}, {"content": [{"type": "text", "text": "Revising."}]},
        {"content": [plan]}, {"content": [write]},
        {"content": [{"type": "text", "text": "Written."}]}]})
    client = Recorder()
    client.answers = ["keep_planning", "approve_accept_edits"]
    async with agent({**daemon_env, "HEDDLE_MODEL": "planned"}, workspace, client) as (conn, _, _):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        sid = session.session_id
        await conn.set_session_mode(session_id=sid, mode_id="plan")
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("Plan")]), 30)
        await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("Again")]), 30)

    kept, approved = client.permissions  # the Write after the approval ran unasked
    assert kept["options"] == ["approve_default", "approve_accept_edits", "keep_planning"]
    assert kept["toolCall"]["kind"] == "switch_mode"
    assert kept["toolCall"]["content"] == [{"type": "content", "content": {
        "type": "text", "text": PLAN}}]
    assert [u["currentModeId"] for u in client.of("current_mode_update")] == [
        "plan", "acceptEdits"]
    assert (workspace / "new.txt").read_text() == "x\n"
    first_result = scripted.requests_for("planned")[1].body["messages"][-1]["content"][0]
    assert first_result["is_error"] and "did not approve the plan" in first_result["content"]


async def test_a_thinking_model_thinks_by_default_and_its_thinking_is_a_thought(
        scripted, daemon_env, workspace):
    model = "claude-opus-4-7"
    scripted.add_scenario(model, {"apiModel": model, "steps": [{"content": [
        {"type": "thinking", "thinking": "A greeting.", "signature": "s1"},
        {"type": "text", "text": "Hello."}]}]})
    client = Recorder()
    async with agent({**daemon_env, "HEDDLE_MODEL": model}, workspace, client) as (conn, _, _):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        result = await asyncio.wait_for(conn.prompt(session_id=session.session_id,
                                                    prompt=[text_block("hi")]), 30)
    assert result.stop_reason == "end_turn"
    assert client.text("agent_thought_chunk") == "A greeting."
    assert client.text() == "Hello."
    assert scripted.requests_for(model)[0].body["thinking"] == {"type": "adaptive",
                                                                   "display": "summarized"}


async def test_the_instruction_files_in_force_are_in_the_answers_meta(scripted, daemon_env,
                                                                      workspace):
    (workspace / "AGENTS.md").write_text("Run the tests before you answer.\n")
    scripted.add_scenario("told", {"steps": [{"content": [{"type": "text", "text": "ok"}]}]})
    async with agent({**daemon_env, "HEDDLE_MODEL": "told"}, workspace) as (conn, _, _):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        assert session.field_meta["heddle"]["instructions"] == [
            {"path": str(workspace / "AGENTS.md"), "scope": "project", "bytes": 33}]
        await asyncio.wait_for(conn.prompt(session_id=session.session_id,
                                           prompt=[text_block("hi")]), 30)
    sent = scripted.requests_for("told")[0].body["messages"][0]["content"]
    assert "Run the tests before you answer." in sent[1]["text"] and sent[-1]["text"] == "hi"
