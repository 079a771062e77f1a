"""Requests the real API would reject are rejected the same way and consume no step."""

from __future__ import annotations

import anthropic
import pytest

from heddle.scripted import ScriptedServer

from .conftest import expected_input_tokens, text_step, user

TOOL_USE = {"type": "tool_use", "id": "toolu_a", "name": "Read", "input": {"path": "x"}}
RESULT = {"type": "tool_result", "tool_use_id": "toolu_a", "content": "file text"}


def _assistant(*blocks):
    return {"role": "assistant", "content": list(blocks)}


def _user(*blocks):
    return {"role": "user", "content": list(blocks)}


HI = _user({"type": "text", "text": "hi"})


@pytest.mark.parametrize(("messages", "message"), [
    pytest.param([HI, _assistant(TOOL_USE), _user({"type": "text", "text": "no result"})],
                 "messages.1: `tool_use` ids were found without `tool_result` blocks "
                 "immediately after: toolu_a. Each `tool_use` block must have a corresponding "
                 "`tool_result` block in the next message.", id="orphan-tool-use"),
    pytest.param([HI, _assistant(TOOL_USE)],
                 "messages.1: `tool_use` ids were found without `tool_result` blocks "
                 "immediately after: toolu_a. Each `tool_use` block must have a corresponding "
                 "`tool_result` block in the next message.", id="tool-use-last"),
    pytest.param([HI, _assistant({"type": "text", "text": "ok"}), _user(RESULT)],
                 "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: "
                 "toolu_a. Each `tool_result` block must have a corresponding `tool_use` block "
                 "in the previous message.", id="orphan-tool-result"),
    pytest.param([HI, HI],
                 'messages: roles must alternate between "user" and "assistant", but found '
                 'multiple "user" roles in a row', id="alternation"),
    pytest.param([_assistant({"type": "text", "text": "hi"})],
                 'messages: first message must use the "user" role', id="assistant-first"),
    pytest.param([HI, _assistant({"type": "thinking", "thinking": "t", "signature": "s"}), HI],
                 "messages.1.content.0: The final block in an assistant message cannot be "
                 "`thinking`.", id="thinking-last"),
    pytest.param([HI, _assistant(TOOL_USE), _user(RESULT), _assistant(TOOL_USE), _user(RESULT)],
                 "messages.3.content.0: `tool_use` ids must be unique", id="duplicate-ids"),
    pytest.param([], "messages: at least one message is required", id="no-messages"),
    pytest.param([_user({"type": "text", "text": ""})],
                 "messages.0.content.0.text: text content blocks must be non-empty",
                 id="empty-text"),
])
async def test_invalid_conversation_is_rejected_without_consuming(server: ScriptedServer, client,
                                                                   messages, message):
    server.add_scenario("s", {"steps": [text_step("ok")]})
    with pytest.raises(anthropic.BadRequestError) as info:
        await client.messages.create(model="s", max_tokens=100, messages=messages)
    assert info.value.type == "invalid_request_error"
    assert info.value.api_message == message
    assert server.cursor("s") == 0
    [recorded] = server.requests
    assert (recorded.scenario, recorded.step_index, recorded.status) == ("s", None, 400)
    ok = await client.messages.create(model="s", max_tokens=100, messages=user("hi"))
    assert ok.content[0].text == "ok"


async def test_answered_tool_use_is_accepted(server: ScriptedServer, client):
    server.add_scenario("s", {"steps": [text_step("ok")]})
    messages = [HI, _assistant({"type": "thinking", "thinking": "t", "signature": "s"},
                               TOOL_USE), _user(RESULT, {"type": "text", "text": "go on"})]
    message = await client.messages.create(model="s", max_tokens=100, messages=messages)
    assert message.content[0].text == "ok"


async def test_with_thinking_a_tool_loop_hands_back_its_thinking(server: ScriptedServer,
                                                                  client):
    server.add_scenario("s", {"steps": [text_step("ok")]})
    thinking = {"type": "enabled", "budget_tokens": 1024}
    without = [HI, _assistant({"type": "text", "text": "Reading."}, TOOL_USE), _user(RESULT)]
    with pytest.raises(anthropic.BadRequestError) as info:
        await client.messages.create(model="s", max_tokens=2000, thinking=thinking,
                                     messages=without)
    assert info.value.api_message.startswith(
        "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `text`.")
    assert server.cursor("s") == 0
    # without thinking the same conversation is fine; with it, the thinking first is
    with_it = [HI, _assistant({"type": "redacted_thinking", "data": "x"}, TOOL_USE), _user(RESULT)]
    for messages, options in ((without, {}), (with_it, {"thinking": thinking})):
        server.add_scenario("s", {"steps": [text_step("ok")]})
        answer = await client.messages.create(model="s", max_tokens=2000, messages=messages,
                                              **options)
        assert answer.content[-1].text == "ok"


@pytest.mark.parametrize(("params", "message"), [
    ({"max_tokens": None}, "max_tokens: Field required"),
    ({"max_tokens": 0}, "max_tokens: Input should be greater than or equal to 1"),
    ({"thinking": {"type": "enabled", "budget_tokens": 2000}, "max_tokens": 1500},
     "`max_tokens` must be greater than `thinking.budget_tokens`."),
    ({"tools": [{"name": "Read", "input_schema": {"type": "object"}},
                {"name": "Read", "input_schema": {"type": "object"}}]},
     "tools: Tool names must be unique."),
    ({"thinking": {"type": "enabled", "budget_tokens": 1000}, "max_tokens": 1500},
     "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"),
    ({"thinking": {"type": "adaptive", "budget_tokens": 2000}},
     "thinking.adaptive.budget_tokens: Extra inputs are not permitted"),
    ({"thinking": {"type": "sometimes"}},
     "thinking: Input tag 'sometimes' found using 'type' does not match any of the expected "
     "tags: 'adaptive', 'disabled', 'enabled'"),
    ({"thinking": {"type": "adaptive"}, "temperature": 0.2},
     "`temperature` may only be set to 1 when thinking is enabled or in interleaved thinking "
     "mode."),
    ({"thinking": {"type": "adaptive"}, "top_k": 5},
     "`top_k` is not supported when thinking is enabled."),
    ({"thinking": {"type": "enabled", "budget_tokens": 1024}, "max_tokens": 2000,
      "top_p": 0.5},
     "`top_p` must be greater than or equal to 0.95 or unset when thinking is enabled."),
    ({"thinking": {"type": "adaptive"}, "tool_choice": {"type": "any"},
      "tools": [{"name": "Read", "input_schema": {"type": "object"}}]},
     "Thinking may not be enabled when tool_choice forces tool use."),
    ({"thinking": {"type": "adaptive", "display": "loud"}},
     "thinking.adaptive.display: Input should be 'summarized' or 'omitted'"),
    ({"output_config": {"effort": "huge"}},
     "output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'"),
])
async def test_invalid_parameters(server: ScriptedServer, client, params, message):
    server.add_scenario("s", {"steps": [text_step("ok")]})
    args = {"model": "s", "max_tokens": 100, "messages": user("hi"), **params}
    if args["max_tokens"] is None or {"temperature", "top_k", "top_p"} & set(args):
        # (the SDK's `create` takes no sampling parameters any more)
        if args["max_tokens"] is None:
            del args["max_tokens"]
        call = client.post("/v1/messages", body=args, cast_to=object)
    else:
        call = client.messages.create(**args)
    with pytest.raises(anthropic.BadRequestError) as info:
        await call
    assert info.value.api_message == message
    assert server.cursor("s") == 0


async def test_context_window_is_enforced(server: ScriptedServer, client):
    server.add_scenario("s", {"contextWindow": 50, "steps": [text_step("ok")]})
    with pytest.raises(anthropic.BadRequestError) as info:
        await client.messages.create(model="s", max_tokens=100, messages=user("x" * 400))
    tokens = expected_input_tokens(server.requests[0].body)
    assert tokens > 50
    assert info.value.api_message == f"prompt is too long: {tokens} tokens > 50 maximum"
    assert server.cursor("s") == 0
    message = await client.messages.create(model="s", max_tokens=100, messages=user("short"))
    assert message.content[0].text == "ok"


async def test_match_assertion(server: ScriptedServer, client):
    server.add_scenario("s", {"steps": [
        {"match": {"lastUserContains": "sorry"}, **text_step("apology accepted")}]})
    with pytest.raises(anthropic.BadRequestError) as info:
        await client.messages.create(model="s", max_tokens=100, messages=user("hello"))
    assert info.value.api_message == (
        "scripted scenario 's' step 0 expected the last user message to contain 'sorry'")
    assert server.cursor("s") == 0
    messages = [HI, _assistant(TOOL_USE),
                _user({**RESULT, "content": [{"type": "text", "text": "I am so"}]},
                      {"type": "text", "text": "rry"})]
    # Text blocks and tool_result contents are joined, so "so" + "rry" matches.
    message = await client.messages.create(model="s", max_tokens=100, messages=messages)
    assert message.content[0].text == "apology accepted"


async def test_steps_run_out(server: ScriptedServer, client):
    server.add_scenario("s", {"steps": [text_step("only")]})
    await client.messages.create(model="s", max_tokens=100, messages=user("hi"))
    with pytest.raises(anthropic.BadRequestError) as info:
        await client.messages.create(model="s", max_tokens=100, messages=user("hi"))
    assert info.value.api_message == "scripted scenario 's' has no step 1 (it has 1)"


async def test_repeat_cycles(server: ScriptedServer, client):
    server.add_scenario("s", {"steps": [text_step("a"), text_step("b")], "repeat": True})
    texts = [(await client.messages.create(model="s", max_tokens=10, messages=user("x")))
             .content[0].text for _ in range(5)]
    assert texts == ["a", "b", "a", "b", "a"]
    assert server.cursor("s") == 1


async def test_unknown_model_is_not_found(server: ScriptedServer, client):
    with pytest.raises(anthropic.NotFoundError) as info:
        await client.messages.create(model="nope", max_tokens=10, messages=user("x"))
    assert info.value.type == "not_found_error"
    assert info.value.api_message == "model: nope"


async def test_add_scenario_replaces_and_resets(server: ScriptedServer, client):
    server.add_scenario("s", {"steps": [text_step("one"), text_step("two")]})
    await client.messages.create(model="s", max_tokens=10, messages=user("x"))
    assert server.cursor("s") == 1
    server.add_scenario("s", {"steps": [text_step("fresh")]})
    assert server.cursor("s") == 0
    message = await client.messages.create(model="s", max_tokens=10, messages=user("x"))
    assert message.content[0].text == "fresh"
