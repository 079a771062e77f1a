"""Context editing (`clear_tool_uses_20250919`) as the beta API applies and reports it."""

from __future__ import annotations

import copy

import anthropic
import pytest

from heddle.scripted import ScriptedServer
from heddle.scripted.context_edits import PLACEHOLDER

from .cachekit import EPHEMERAL, LONG, assistant, text, total_tokens, user

BETA = "context-management-2025-06-27"
TOOLS = [{"name": name, "description": f"The {name} tool.", "input_schema": {"type": "object"}}
         for name in ("Read", "Memory")]


def _conversation(names: list[str]) -> list[dict]:
    """One tool use per assistant message, each answered, then the question."""
    messages = [user(text("Look through the files."))]
    for i, name in enumerate(names):
        messages.append(assistant({"type": "tool_use", "id": f"t{i}", "name": name,
                                   "input": {"path": f"file{i}.py"}}))
        messages.append(user({"type": "tool_result", "tool_use_id": f"t{i}",
                              "content": f"contents of file{i}: " + "y" * 400}))
    messages[-1]["content"].append(text("What did you find?"))
    return messages


def _cleared(messages: list[dict], ids: list[str], inputs: bool = False) -> list[dict]:
    """What the docs say the model sees: those results replaced by placeholder text."""
    edited = copy.deepcopy(messages)
    for message in edited:
        for block in message["content"]:
            if block.get("tool_use_id") in ids:
                block["content"] = PLACEHOLDER
            if inputs and block.get("type") == "tool_use" and block["id"] in ids:
                block["input"] = {}
    return edited


async def _edit(client: anthropic.AsyncAnthropic, messages: list[dict], *edits: dict, **kwargs):
    return await client.beta.messages.create(
        model="s", max_tokens=100, betas=[BETA], tools=TOOLS, messages=messages,
        context_management={"edits": list(edits)}, **kwargs)


@pytest.fixture
def scenario(server: ScriptedServer) -> ScriptedServer:
    server.add_scenario("s", {"repeat": True, "steps": [{"content": [
        {"type": "text", "text": "Found it."}]}]})
    return server


async def test_the_oldest_tool_results_are_cleared_past_the_trigger(scenario, client):
    messages = _conversation(["Read"] * 5)
    reply = await _edit(client, messages, {"type": "clear_tool_uses_20250919",
                                           "trigger": {"type": "tool_uses", "value": 4},
                                           "keep": {"type": "tool_uses", "value": 2}})
    seen = {**scenario.requests[0].body, "messages": _cleared(messages, ["t0", "t1", "t2"])}
    cleared = total_tokens(scenario.requests[0].body) - total_tokens(seen)
    assert cleared > 250  # three results of about 420 characters each
    assert [e.model_dump() for e in reply.context_management.applied_edits] == [
        {"type": "clear_tool_uses_20250919", "cleared_tool_uses": 3,
         "cleared_input_tokens": cleared}]
    assert reply.usage.input_tokens == total_tokens(seen)
    assert scenario.requests[0].body["messages"] == messages  # recorded as sent
    assert scenario.requests[0].context_management == reply.context_management.model_dump()


async def test_the_trigger_fires_only_above_its_value(scenario, client):
    messages = _conversation(["Read"] * 5)
    reply = await _edit(client, messages, {"type": "clear_tool_uses_20250919"})  # 100k tokens
    assert reply.context_management.applied_edits == []
    total = total_tokens(scenario.requests[0].body)
    assert reply.usage.input_tokens == total
    for trigger, fires in (({"type": "tool_uses", "value": 5}, False),
                           ({"type": "input_tokens", "value": total}, False),
                           ({"type": "input_tokens", "value": total - 1}, True)):
        reply = await _edit(client, messages, {"type": "clear_tool_uses_20250919",
                                               "trigger": trigger})
        assert bool(reply.context_management.applied_edits) is fires, trigger


async def test_excluded_tools_are_kept_and_inputs_cleared_on_request(scenario, client):
    messages = _conversation(["Read", "Memory", "Read", "Read"])
    reply = await _edit(client, messages, {"type": "clear_tool_uses_20250919",
                                           "trigger": {"type": "input_tokens", "value": 100},
                                           "keep": {"type": "tool_uses", "value": 1},
                                           "exclude_tools": ["Memory"],
                                           "clear_tool_inputs": True})
    seen = {**scenario.requests[0].body,
            "messages": _cleared(messages, ["t0", "t2"], inputs=True)}
    assert reply.context_management.applied_edits[0].cleared_tool_uses == 2
    assert reply.usage.input_tokens == total_tokens(seen)


async def test_an_edit_that_clears_too_little_is_not_applied(scenario, client):
    messages = _conversation(["Read"] * 4)
    edit = {"type": "clear_tool_uses_20250919", "trigger": {"type": "tool_uses", "value": 1},
            "keep": {"type": "tool_uses", "value": 3}}
    applied = await _edit(client, messages, edit)
    assert applied.context_management.applied_edits[0].cleared_tool_uses == 1
    cleared = applied.context_management.applied_edits[0].cleared_input_tokens
    held = await _edit(client, messages,
                       {**edit, "clear_at_least": {"type": "input_tokens", "value": cleared + 1}})
    assert held.context_management.applied_edits == []


async def test_a_stream_reports_the_edits_in_its_last_message_delta(scenario, client):
    messages = _conversation(["Read"] * 4)
    stream = await _edit(client, messages, {"type": "clear_tool_uses_20250919",
                                            "trigger": {"type": "tool_uses", "value": 3}},
                         stream=True)
    events = [event async for event in stream]
    delta = events[-2]
    assert delta.type == "message_delta"
    assert delta.context_management.applied_edits[0].cleared_tool_uses == 1
    assert getattr(events[0].message, "context_management", None) is None


async def test_clearing_moves_the_cache_prefix(scenario, client):
    system = [text(LONG, EPHEMERAL)]
    messages = _conversation(["Read"] * 4)
    messages[-1]["content"][-1]["cache_control"] = EPHEMERAL
    edit = {"type": "clear_tool_uses_20250919", "trigger": {"type": "tool_uses", "value": 3}}
    await _edit(client, messages, edit, system=system)
    again = await _edit(client, messages, edit, system=system)
    assert scenario.requests[1].cache.read_location == "messages.8.content.1"
    # Clearing one more result changes the prompt there: what still hits ends just before it.
    more = await _edit(client, messages, {**edit, "keep": {"type": "tool_uses", "value": 2}},
                       system=system)
    assert scenario.requests[2].cache.read_location == "messages.3.content.0"
    assert more.usage.cache_read_input_tokens < again.usage.cache_read_input_tokens


async def test_count_tokens_gives_both_counts(scenario, client):
    messages = _conversation(["Read"] * 5)
    counted = await client.beta.messages.count_tokens(
        model="s", betas=[BETA], tools=TOOLS, messages=messages,
        context_management={"edits": [{"type": "clear_tool_uses_20250919",
                                        "trigger": {"type": "tool_uses", "value": 1}}]})
    body = scenario.requests[0].body
    assert counted.context_management.original_input_tokens == total_tokens(body)
    assert counted.input_tokens == total_tokens(
        {**body, "messages": _cleared(messages, ["t0", "t1"])})


async def test_context_management_needs_the_beta_and_a_known_edit(scenario, client):
    edits = {"edits": [{"type": "clear_tool_uses_20250919"}]}
    with pytest.raises(anthropic.BadRequestError) as caught:
        await client.messages.create(model="s", max_tokens=10, messages=[user(text("hi"))],
                                     extra_body={"context_management": edits})
    assert caught.value.body["error"]["message"] == (
        "context_management: Extra inputs are not permitted")
    with pytest.raises(anthropic.BadRequestError) as caught:
        await _edit(client, [user(text("hi"))], {"type": "clear_thinking_20251015"})
    assert "not implemented by the scripted model" in caught.value.body["error"]["message"]
    with pytest.raises(anthropic.BadRequestError) as caught:
        await _edit(client, [user(text("hi"))], {"type": "clear_tool_uses_20250919",
                                                 "keep": {"type": "tokens", "value": 3}})
    assert caught.value.body["error"]["message"] == (
        "context_management.edits.0.keep.type: Input should be 'tool_uses'")
    assert scenario.cursor("s") == 0
