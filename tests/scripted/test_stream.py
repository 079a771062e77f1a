"""Streams, messages and usage as the real SDK sees them."""

from __future__ import annotations

import json
import math
import time

import anthropic

from heddle.scripted import ScriptedServer

from .conftest import expected_input_tokens, text_step, user


async def _events(client: anthropic.AsyncAnthropic, model: str, **kwargs):
    kwargs.setdefault("messages", user("hi"))
    stream = await client.messages.create(model=model, max_tokens=1000, stream=True, **kwargs)
    return [(time.monotonic(), ev) async for ev in stream]


async def test_text_and_tool_use_stream_incrementally(server: ScriptedServer, client):
    tool_input = {"path": "app.py", "lines": [1, 2, 3], "note": "ünïcode"}
    server.add_scenario("s", {"steps": [{
        "content": [{"type": "text", "text": "Let me look at the file."},
                    {"type": "tool_use", "name": "Read", "input": tool_input}],
        "chunk": 8, "delayMs": 20}]})
    timed = await _events(client, "s")
    events = [ev for _, ev in timed]
    kinds = [ev.type for ev in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds[1:4] == ["content_block_start", "content_block_delta", "content_block_delta"]
    assert kinds.count("content_block_start") == kinds.count("content_block_stop") == 2
    # 20 ms between events: the stream arrives over time, not in one piece.
    assert timed[-1][0] - timed[0][0] > 0.2

    text = "".join(ev.delta.text for ev in events
                   if ev.type == "content_block_delta" and ev.delta.type == "text_delta")
    assert text == "Let me look at the file."
    tool_start = next(ev for ev in events if ev.type == "content_block_start" and ev.index == 1)
    assert tool_start.content_block.type == "tool_use"
    assert tool_start.content_block.name == "Read"
    assert tool_start.content_block.id.startswith("toolu_")
    fragments = [ev.delta.partial_json for ev in events
                 if ev.type == "content_block_delta" and ev.delta.type == "input_json_delta"]
    assert fragments[0] == ""
    assert all(len(f) <= 8 for f in fragments)
    assert json.loads("".join(fragments)) == tool_input

    assert events[0].message.usage.input_tokens == expected_input_tokens(server.requests[0].body)
    assert events[0].message.usage.cache_read_input_tokens == 0
    delta = events[-2]
    assert delta.delta.stop_reason == "tool_use" and delta.delta.stop_sequence is None
    output_chars = len("Let me look at the file.") + len("".join(fragments))
    assert delta.usage.output_tokens == math.ceil(output_chars / 4)


async def test_thinking_and_signature_deltas(server: ScriptedServer, client):
    server.add_scenario("s", {"steps": [{
        "content": [{"type": "thinking", "thinking": "hmm, let me think", "signature": "sig1"},
                    {"type": "text", "text": "Done."}],
        "chunk": 4}]})
    events = [ev for _, ev in await _events(client, "s")]
    deltas = [ev.delta for ev in events if ev.type == "content_block_delta" and ev.index == 0]
    assert [d.type for d in deltas][-1] == "signature_delta"
    assert "".join(d.thinking for d in deltas[:-1]) == "hmm, let me think"
    assert deltas[-1].signature == "sig1"
    assert events[-2].delta.stop_reason == "end_turn"


async def test_stream_helper_accumulates_the_same_message(server: ScriptedServer, client):
    server.add_scenario("s", {"steps": [{"content": [
        {"type": "thinking", "thinking": "plan", "signature": "s"},
        {"type": "text", "text": "Reading two files."},
        {"type": "tool_use", "id": "toolu_given", "name": "Read", "input": {"path": "a"}},
        {"type": "tool_use", "name": "Glob", "input": {}}]}]})
    async with client.messages.stream(model="s", max_tokens=1000, messages=user("go")) as s:
        message = await s.get_final_message()
    assert [b.type for b in message.content] == ["thinking", "text", "tool_use", "tool_use"]
    assert message.content[2].id == "toolu_given" and message.content[2].input == {"path": "a"}
    assert message.content[3].input == {} and message.content[3].id.startswith("toolu_")
    assert message.stop_reason == "tool_use"


async def test_tool_ids_are_unique_per_server(server: ScriptedServer, client):
    step = {"content": [{"type": "tool_use", "name": "Read", "input": {"path": "a"}}]}
    server.add_scenario("a", {"steps": [step], "repeat": True})
    server.add_scenario("b", {"steps": [step], "repeat": True})
    ids = set()
    for model in ("a", "b", "a"):
        message = await client.messages.create(model=model, max_tokens=100, messages=user("x"))
        ids.add(message.content[0].id)
    assert len(ids) == 3


async def test_non_streaming_message(server: ScriptedServer, client):
    server.add_scenario("s", {"steps": [text_step("Hello there.", stopReason="end_turn")]})
    message = await client.messages.create(model="s", max_tokens=100, messages=user("hi"))
    assert message.role == "assistant" and message.model == "s"
    assert message.id.startswith("msg_")
    assert [b.text for b in message.content] == ["Hello there."]
    assert message.stop_reason == "end_turn"
    assert message.usage.output_tokens == math.ceil(len("Hello there.") / 4)
    assert message.usage.cache_creation_input_tokens == 0


async def test_explicit_max_tokens_stop(server: ScriptedServer, client):
    server.add_scenario("s", {"steps": [text_step("cut off", stopReason="max_tokens")]})
    events = [ev for _, ev in await _events(client, "s")]
    assert events[-2].delta.stop_reason == "max_tokens"
    assert "".join(ev.delta.text for ev in events if ev.type == "content_block_delta") == "cut off"


async def test_output_over_max_tokens_is_truncated(server: ScriptedServer, client):
    long = "x" * 100
    server.add_scenario("s", {"steps": [
        {"content": [{"type": "text", "text": long},
                     {"type": "tool_use", "name": "Read", "input": {"path": "a"}}]}],
        "repeat": True})
    small = await client.messages.create(model="s", max_tokens=5, messages=user("hi"))
    assert [b.type for b in small.content] == ["text"]
    assert small.content[0].text == "x" * 20
    assert small.stop_reason == "max_tokens" and small.usage.output_tokens == 5
    # Raising max_tokens helps: the same step now fits.
    big = await client.messages.create(model="s", max_tokens=1000, messages=user("hi"))
    assert big.content[0].text == long and big.stop_reason == "tool_use"


async def test_empty_content_still_streams_a_whole_message(server: ScriptedServer, client):
    server.add_scenario("s", {"steps": [{}]})
    events = [ev for _, ev in await _events(client, "s")]
    assert [ev.type for ev in events] == ["message_start", "message_delta", "message_stop"]


async def test_count_tokens_does_not_consume_a_step(server: ScriptedServer, client):
    server.add_scenario("s", {"steps": [text_step("a")]})
    counted = await client.messages.count_tokens(
        model="s", messages=user("hello"), system="Be brief.",
        tools=[{"name": "Read", "input_schema": {"type": "object"}}])
    assert counted.input_tokens == expected_input_tokens(server.requests[0].body)
    assert server.requests[0].path == "/v1/messages/count_tokens"
    assert server.cursor("s") == 0


async def test_stop_sequence(server: ScriptedServer, client):
    server.add_scenario("s", {"steps": [text_step("one two", stopReason="stop_sequence",
                                                  stopSequence="three")]})
    message = await client.messages.create(model="s", max_tokens=100, messages=user("hi"),
                                           stop_sequences=["three"])
    assert (message.stop_reason, message.stop_sequence) == ("stop_sequence", "three")
