"""Prompt caching as the Messages API accounts it: breakpoints, prefixes, lifetimes, lookback."""

from __future__ import annotations

import anthropic
import pytest

from heddle.scripted import ManualClock, ScriptedServer

from .cachekit import (EPHEMERAL, HOUR, LONG, assistant, clean, dump, hello, prefix_tokens,
                       text, total_tokens, user)

QUESTION = user(text("What does app.py do?"))
SYSTEM = [text(LONG, EPHEMERAL)]


def _tools(description: str = LONG, marker: dict | None = None) -> list[dict]:
    tool = {"name": "Read", "description": description,
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}
    return [{**tool, "cache_control": marker} if marker else tool]


async def _ask(client: anthropic.AsyncAnthropic, model: str = "s", **kwargs):
    kwargs.setdefault("messages", [QUESTION])
    return await client.messages.create(model=model, max_tokens=100, **kwargs)


def _split(usage) -> tuple[int, int, int]:
    return usage.cache_creation_input_tokens, usage.cache_read_input_tokens, usage.input_tokens


async def test_a_second_identical_request_reads_what_the_first_wrote(server: ScriptedServer,
                                                                      client):
    server.add_scenario("s", hello())
    first = await _ask(client, system=SYSTEM)
    second = await _ask(client, system=SYSTEM)
    body = server.requests[0].body
    cached, total = prefix_tokens(body, "system.0"), total_tokens(body)
    assert cached >= 1024
    assert _split(first.usage) == (cached, 0, total - cached)
    assert _split(second.usage) == (0, cached, total - cached)
    wrote, read = (r.cache for r in server.requests_for("s"))
    assert (wrote.written, wrote.read_location) == (("system.0",), None)
    assert (read.written, read.read_location, read.read_tokens) == ((), "system.0", cached)
    assert [(b.location, b.tokens, b.ttl, b.cacheable) for b in read.breakpoints] == [
        ("system.0", cached, "5m", True)]


async def test_a_request_without_breakpoints_neither_reads_nor_writes(server, client):
    server.add_scenario("s", hello())
    await _ask(client, system=SYSTEM)
    plain = await _ask(client, system=[text(LONG)])
    assert _split(plain.usage) == (0, 0, total_tokens(server.requests[1].body))
    assert server.requests[1].cache.breakpoints == ()


async def test_the_prefix_runs_tools_then_system_then_messages(server: ScriptedServer, client):
    server.add_scenario("s", hello())
    tools = _tools(marker=EPHEMERAL)
    await _ask(client, tools=tools, system="You are Heddle.")
    # The system prompt comes after the tools: changing it keeps the tools' prefix.
    other_system = await _ask(client, tools=tools, system="You are Heddle, version two.")
    tools_tokens = prefix_tokens(server.requests[1].body, "tools.0")
    assert _split(other_system.usage)[:2] == (0, tools_tokens)
    # A system breakpoint caches the tools as well: its prefix starts with them.
    both = await _ask(client, tools=tools, system=[text("Rules. " * 50, EPHEMERAL)],
                      messages=[user(text("Go.", EPHEMERAL))])
    body = server.requests[2].body
    assert [b.location for b in server.requests[2].cache.breakpoints] == [
        "tools.0", "system.0", "messages.0.content.0"]
    assert both.usage.cache_read_input_tokens == tools_tokens
    assert both.usage.cache_creation_input_tokens == (
        prefix_tokens(body, "messages.0.content.0") - tools_tokens)
    assert server.requests[2].cache.written == ("system.0", "messages.0.content.0")


async def test_changing_a_tool_description_misses_the_whole_cache(server: ScriptedServer, client):
    server.add_scenario("s", hello())
    await _ask(client, tools=_tools(), system=SYSTEM)
    changed = await _ask(client, tools=_tools(LONG + " Now with line numbers."), system=SYSTEM)
    assert changed.usage.cache_read_input_tokens == 0
    assert changed.usage.cache_creation_input_tokens == prefix_tokens(
        server.requests[1].body, "system.0")
    again = await _ask(client, tools=_tools(), system=SYSTEM)  # the first entry is still there
    assert again.usage.cache_read_input_tokens == prefix_tokens(server.requests[0].body,
                                                                "system.0")


def _system_of(tokens: int) -> list[dict]:
    """A system block whose prefix (no tools) is exactly `tokens` tokens."""
    overhead = len(dump([text("")])) - 1  # the prefix ends before the list's "]"
    return [text("x" * (tokens * 4 - overhead), EPHEMERAL)]


async def test_a_prefix_under_the_minimum_is_neither_written_nor_read(server: ScriptedServer,
                                                                       client):
    server.add_scenario("s", hello())
    server.add_scenario("haiku", {**hello(), "apiModel": "claude-haiku-4-5"})
    short = _system_of(1023)
    for _ in range(2):
        under = await _ask(client, system=short)
        assert _split(under.usage) == (0, 0, total_tokens(server.requests[-1].body))
    assert prefix_tokens(server.requests[-1].body, "system.0") == 1023
    assert server.requests[-1].cache.breakpoints[0].cacheable is False
    enough = await _ask(client, system=_system_of(1024))
    assert enough.usage.cache_creation_input_tokens == 1024
    # Haiku 4.5 caches nothing under 4096 tokens (the docs' table).
    haiku = await _ask(client, "haiku", system=_system_of(4095))
    assert haiku.usage.cache_creation_input_tokens == 0
    assert server.requests[-1].cache.minimum == 4096
    haiku = await _ask(client, "haiku", system=_system_of(4096))
    assert haiku.usage.cache_creation_input_tokens == 4096


async def test_five_minutes_from_the_last_use(clocked: ScriptedServer, clocked_client,
                                              clock: ManualClock):
    clocked.add_scenario("s", hello())
    cached = None
    for wait, hit in ((0, False), (299, True), (299, True), (300, False), (1, True)):
        clock.advance(wait)
        reply = await _ask(clocked_client, system=SYSTEM)
        cached = cached or prefix_tokens(clocked.requests[0].body, "system.0")
        # Each read refreshes the entry; 300 s without one and it is gone (then written anew).
        assert _split(reply.usage)[:2] == ((0, cached) if hit else (cached, 0)), (wait, hit)


async def test_a_read_refreshes_the_entry_it_found_by_lookback(clocked: ScriptedServer,
                                                               clocked_client,
                                                               clock: ManualClock):
    clocked.add_scenario("s", hello())
    system = [text(LONG)]
    base = [text(f"block {i}") for i in range(6)]
    base[-1]["cache_control"] = EPHEMERAL
    await _ask(clocked_client, system=system, messages=[user(*base)])
    for tail in ("first", "second"):  # each tail differs: only the entry at block 5 is shared
        clock.advance(299)
        later = [user(*clean(base), text(f"{tail} a"), text(f"{tail} b", EPHEMERAL))]
        reply = await _ask(clocked_client, system=system, messages=later)
        assert clocked.requests[-1].cache.read_location == "messages.0.content.5", tail
        assert reply.usage.cache_read_input_tokens > 0


async def test_one_hour_with_ttl_1h(clocked: ScriptedServer, clocked_client, clock: ManualClock):
    clocked.add_scenario("s", hello())
    hour = [text(LONG, HOUR)]
    first = await _ask(clocked_client, system=hour)
    cached = prefix_tokens(clocked.requests[0].body, "system.0")
    assert first.usage.cache_creation.ephemeral_1h_input_tokens == cached
    assert first.usage.cache_creation.ephemeral_5m_input_tokens == 0
    five_minutes = [text(LONG + " Five minutes.", EPHEMERAL)]
    await _ask(clocked_client, system=five_minutes)
    clock.advance(3599)
    assert (await _ask(clocked_client, system=hour)).usage.cache_read_input_tokens == cached
    five = await _ask(clocked_client, system=five_minutes)
    assert five.usage.cache_read_input_tokens == 0  # the 5-minute one expired long ago
    clock.advance(3600)
    late = await _ask(clocked_client, system=hour)
    assert _split(late.usage)[:2] == (cached, 0)


async def test_mixed_lifetimes_expire_separately(clocked: ScriptedServer, clocked_client,
                                                 clock: ManualClock):
    clocked.add_scenario("s", hello())
    system, messages = [text(LONG, HOUR)], [user(text(LONG, EPHEMERAL))]
    first = await _ask(clocked_client, system=system, messages=messages)
    body = clocked.requests[0].body
    hour, last = prefix_tokens(body, "system.0"), prefix_tokens(body, "messages.0.content.0")
    assert (first.usage.cache_creation.ephemeral_1h_input_tokens,
            first.usage.cache_creation.ephemeral_5m_input_tokens) == (hour, last - hour)
    clock.advance(301)  # the 5-minute part is gone, the 1-hour part is not
    again = await _ask(clocked_client, system=system, messages=messages)
    assert clocked.requests[1].cache.read_location == "system.0"
    assert _split(again.usage)[:2] == (last - hour, hour)
    assert again.usage.cache_creation.ephemeral_5m_input_tokens == last - hour


def _many(count: int, marked: tuple[int, ...]) -> list[dict]:
    return [user(*(text(f"note {i}: keep the tests real", EPHEMERAL if i in marked else None)
                   for i in range(count)))]


async def test_the_lookback_reaches_twenty_blocks(server: ScriptedServer, client):
    server.add_scenario("s", hello())
    system = [text(LONG)]
    # Written at block 5; a breakpoint 19 blocks later still finds it (20 checks with its own).
    await _ask(client, system=system, messages=_many(6, (5,)))
    near = await _ask(client, system=system, messages=_many(25, (24,)))
    body = server.requests[1].body
    at5 = prefix_tokens(body, "messages.0.content.5")
    assert server.requests[1].cache.read_location == "messages.0.content.5"
    assert _split(near.usage)[:2] == (prefix_tokens(body, "messages.0.content.24") - at5, at5)
    server.clear_cache()
    await _ask(client, system=system, messages=_many(6, (5,)))
    far = await _ask(client, system=system, messages=_many(26, (25,)))
    assert far.usage.cache_read_input_tokens == 0  # 20 blocks back from 25 is block 6
    # Another breakpoint where the old one was lets the lookback start there too.
    server.clear_cache()
    await _ask(client, system=system, messages=_many(6, (5,)))
    both = await _ask(client, system=system, messages=_many(26, (5, 25)))
    assert both.usage.cache_read_input_tokens == at5
    assert server.requests[-1].cache.read_location == "messages.0.content.5"


async def test_the_docs_lookback_example(server: ScriptedServer, client):
    """The prompt caching page's example: 30 blocks, cached at the last, one of them changed."""
    server.add_scenario("s", hello())
    system = [text(LONG)]

    def blocks(changed: int | None, marked: tuple[int, ...]) -> list[dict]:
        return [user(*(text(f"block {i}" + (" changed" if i == changed else ""),
                            EPHEMERAL if i in marked else None) for i in range(31)))]

    written = blocks(None, (29,))
    written[0]["content"].pop()  # the first request has 30 blocks
    await _ask(client, system=system, messages=written)
    # Block 24 changed (0-based; the docs' block 25): the prefix through block 23 still reads.
    await _ask(client, system=system, messages=blocks(24, (30,)))
    assert server.requests[1].cache.read_location == "messages.0.content.23"
    # Block 4 changed: 20 blocks back from 30 is block 11, so nothing is found...
    server.clear_cache()
    await _ask(client, system=system, messages=written)
    far = await _ask(client, system=system, messages=blocks(4, (30,)))
    assert (far.usage.cache_read_input_tokens, server.requests[3].cache.read_location) == (0, None)
    # ...unless a breakpoint sits on the changed block: its lookback finds block 3.
    server.clear_cache()
    await _ask(client, system=system, messages=written)
    await _ask(client, system=system, messages=blocks(4, (4, 30)))
    assert server.requests[5].cache.read_location == "messages.0.content.3"


def _reads(*ids: str) -> dict:
    return assistant(*({"type": "tool_use", "id": i, "name": "Read", "input": {"path": i}}
                       for i in ids))


def _results(*pairs: tuple[str, str], marker_last: bool = True) -> dict:
    blocks = [{"type": "tool_result", "tool_use_id": i, "content": c} for i, c in pairs]
    if marker_last:
        blocks[-1]["cache_control"] = EPHEMERAL
    return user(*blocks)


async def test_parallel_tool_results_are_cached_up_to_the_marked_one(server: ScriptedServer,
                                                                      client):
    server.add_scenario("s", hello())
    turn = [QUESTION, _reads("a", "b", "c"), _results(("a", "one"), ("b", "two"), ("c", "3"))]
    await _ask(client, tools=_tools(), messages=turn)
    follow = [*clean(turn), assistant(text("One more."), *_reads("d")["content"]),
              _results(("d", "four"))]
    reply = await _ask(client, tools=_tools(), messages=follow)
    body = server.requests[1].body
    assert server.requests[1].cache.read_location == "messages.2.content.2"
    assert reply.usage.cache_read_input_tokens == prefix_tokens(body, "messages.2.content.2")
    assert server.requests[1].cache.written == ("messages.4.content.0",)
    # The marked result's prefix holds the other two: with a different second result, what
    # still matches ends at the first.
    changed = [*clean(turn[:2]), _results(("a", "one"), ("b", "TWO"), ("c", "3"),
                                          marker_last=False), *follow[3:]]
    partly = await _ask(client, tools=_tools(), messages=changed)
    assert server.requests[2].cache.read_location == "messages.2.content.0"
    assert partly.usage.cache_read_input_tokens == prefix_tokens(server.requests[2].body,
                                                                 "messages.2.content.0")


THINK = {"type": "thinking", "thinking": "The user wants the weather; call the tool.",
         "signature": "sig-1"}


async def test_thinking_blocks_in_the_prefix(server: ScriptedServer, client):
    server.add_scenario("s", hello())
    system = [text(LONG, EPHEMERAL)]
    loop = [user(text("Weather in Paris?")),
            assistant(THINK, *_reads("a")["content"]), _results(("a", "sunny"))]
    first = await _ask(client, system=system, messages=loop)
    # Thinking of the current tool loop stays in the prompt and in its cached prefix.
    assert first.usage.input_tokens + first.usage.cache_creation_input_tokens == total_tokens(
        server.requests[0].body)
    still_looping = [*clean(loop), _reads("b"), _results(("b", "22 C"))]
    await _ask(client, system=system, messages=still_looping)
    assert server.requests[1].cache.read_location == "messages.2.content.0"
    # A new user message ends the loop: the API strips earlier thinking, so what the cache
    # still matches ends at the first user message, before the thinking was.
    new_turn = [*clean(loop), assistant(text("It is sunny.")), user(text("Thanks!", EPHEMERAL))]
    after = await _ask(client, system=system, messages=new_turn)
    assert server.requests[2].cache.read_location == "messages.0.content.0"
    stripped = {**server.requests[2].body, "messages": [
        new_turn[0], assistant(*_reads("a")["content"]), *new_turn[2:]]}
    assert sum(_split(after.usage)) == total_tokens(stripped)
    assert after.usage.cache_read_input_tokens == prefix_tokens(stripped, "messages.0.content.0")
    assert after.usage.cache_creation_input_tokens == (
        prefix_tokens(stripped, "messages.4.content.0") - after.usage.cache_read_input_tokens)


async def test_a_thinking_block_cannot_carry_a_breakpoint(server: ScriptedServer, client):
    server.add_scenario("s", hello())
    messages = [user(text("hi")), assistant({**THINK, "cache_control": EPHEMERAL},
                                            text("hello")), user(text("go"))]
    with pytest.raises(anthropic.BadRequestError) as caught:
        await _ask(client, messages=messages)
    assert caught.value.body["error"]["message"] == (
        "messages.1.content.0.thinking.cache_control: Extra inputs are not permitted")


async def test_more_than_four_breakpoints_are_refused(server: ScriptedServer, client):
    server.add_scenario("s", hello())
    four = [user(*(text(f"part {i}", EPHEMERAL) for i in range(4)))]
    await _ask(client, messages=four)
    for messages, extra in (([user(*(text(f"part {i}", EPHEMERAL) for i in range(5)))], {}),
                            (four + [assistant(text("ok")), user(text("more"))],
                             {"cache_control": EPHEMERAL})):
        with pytest.raises(anthropic.BadRequestError) as caught:
            await _ask(client, messages=messages, **extra)
        assert caught.value.status_code == 400
        assert caught.value.body["error"] == {
            "type": "invalid_request_error",
            "message": "A maximum of 4 blocks with cache_control may be provided. Found 5."}
    assert server.cursor("s") == 1  # refused requests consume no step
    assert [r.cache for r in server.requests[1:]] == [None, None]


async def test_a_one_hour_breakpoint_after_a_five_minute_one_is_refused(server, client):
    server.add_scenario("s", hello())
    with pytest.raises(anthropic.BadRequestError) as caught:
        await _ask(client, tools=_tools(marker=EPHEMERAL), system=[text("x", HOUR)])
    assert caught.value.body["error"]["message"] == (
        "system.0.cache_control.ttl: a ttl='1h' cache_control block must not come after a "
        "ttl='5m' cache_control block. Note that blocks are processed in the following order: "
        "`tools`, `system`, `messages`.")
    with pytest.raises(anthropic.BadRequestError) as caught:
        await _ask(client, system=[text("x", {"type": "ephemeral", "ttl": "10m"})])
    assert caught.value.body["error"]["message"] == (
        "system.0.cache_control.ephemeral.ttl: Input should be '5m' or '1h'")


async def test_usage_in_the_stream_and_in_the_message(server: ScriptedServer, client):
    server.add_scenario("s", hello())
    messages = [user(text("Summarise the design.", EPHEMERAL))]
    system = [text(LONG, HOUR)]
    stream = await client.messages.create(model="s", max_tokens=100, stream=True,
                                          system=system, messages=messages)
    events = [event async for event in stream]
    body = server.requests[0].body
    hour, last = prefix_tokens(body, "system.0"), prefix_tokens(body, "messages.0.content.0")
    start = events[0].message.usage
    assert _split(start) == (last, 0, total_tokens(body) - last)
    assert (start.cache_creation.ephemeral_1h_input_tokens,
            start.cache_creation.ephemeral_5m_input_tokens) == (hour, last - hour)
    end = events[-2].usage
    assert (end.cache_creation_input_tokens, end.input_tokens, end.output_tokens) == (
        last, total_tokens(body) - last, 1)
    message = await client.messages.create(model="s", max_tokens=100, system=system,
                                           messages=messages)
    assert _split(message.usage) == (0, last, total_tokens(body) - last)
    assert (message.usage.cache_creation.ephemeral_1h_input_tokens,
            message.usage.cache_creation.ephemeral_5m_input_tokens) == (0, 0)
    async with client.messages.stream(model="s", max_tokens=100, system=system,
                                      messages=messages) as helper:
        final = await helper.get_final_message()
    assert _split(final.usage) == (0, last, total_tokens(body) - last)


async def test_the_cache_is_the_models_not_the_scenarios(server: ScriptedServer, client):
    for name, model in (("a", "claude-sonnet-4-5"), ("b", "claude-sonnet-4-5-20250929"),
                        ("c", "claude-opus-4-1"), ("d", None)):
        server.add_scenario(name, {**hello(), **({"apiModel": model} if model else {})})
    await _ask(client, "a", system=SYSTEM)
    cached = prefix_tokens(server.requests[0].body, "system.0")
    assert (await _ask(client, "b", system=SYSTEM)).usage.cache_read_input_tokens == cached
    assert (await _ask(client, "c", system=SYSTEM)).usage.cache_read_input_tokens == 0
    assert (await _ask(client, "d", system=SYSTEM)).usage.cache_read_input_tokens == 0


async def test_tool_choice_invalidates_only_the_messages_prefix(server: ScriptedServer, client):
    server.add_scenario("s", hello())
    messages = [user(text(LONG, EPHEMERAL))]
    await _ask(client, tools=_tools(), system=SYSTEM, messages=messages)
    forced = await _ask(client, tools=_tools(), system=SYSTEM, messages=messages,
                        tool_choice={"type": "any"})
    assert server.requests[1].cache.read_location == "system.0"
    assert forced.usage.cache_read_input_tokens == prefix_tokens(server.requests[1].body,
                                                                 "system.0")


async def test_top_level_cache_control_marks_the_last_block(server: ScriptedServer, client):
    server.add_scenario("s", hello())
    first = [user(text(LONG))]
    await _ask(client, messages=first, cache_control=EPHEMERAL)
    assert server.requests[0].cache.written == ("messages.0.content.0",)
    follow = [*first, assistant(text("Noted.")), user(text("And then?"))]
    reply = await _ask(client, messages=follow, cache_control=EPHEMERAL)
    assert reply.usage.cache_read_input_tokens == prefix_tokens(server.requests[1].body,
                                                                "messages.0.content.0")
    assert server.requests[1].cache.written == ("messages.2.content.0",)
    # A message given as a string is one block, and the last one here.
    await _ask(client, messages=[*follow[:2], {"role": "user", "content": "Why?"}],
               cache_control=EPHEMERAL)
    assert server.requests[2].cache.written == ("messages.2.content",)
    four = [user(*(text(f"part {i}", EPHEMERAL) for i in range(3))),
            assistant(text("ok", EPHEMERAL)), {"role": "user", "content": "more"}]
    with pytest.raises(anthropic.BadRequestError, match="Found 5"):
        await _ask(client, messages=four, cache_control=EPHEMERAL)


async def test_only_answered_requests_touch_the_cache(server: ScriptedServer, client):
    server.add_scenario("s", {"steps": [{"fault": {"status": 529}},
                                        {"fault": {"errorEvent": "overloaded_error"}},
                                        *hello(2)["steps"]]})
    for _ in range(2):  # an error status, and an error event that a non-stream gets as 529
        with pytest.raises(anthropic.OverloadedError):
            await _ask(client, system=SYSTEM)
    await client.messages.count_tokens(model="s", system=SYSTEM, messages=[QUESTION])
    assert [r.cache for r in server.requests] == [None, None, None]
    reply = await _ask(client, system=SYSTEM)
    assert _split(reply.usage)[:2] == (prefix_tokens(server.requests[0].body, "system.0"), 0)
