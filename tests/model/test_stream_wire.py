"""AnthropicModel over real HTTP, through the real SDK client: what the decoder meets on the wire.

`RawServer` sends byte-exact answers the scripted server never sends (other line endings,
events cut anywhere, unknown types, short bodies); the scripted server checks the request.
"""

from __future__ import annotations

import asyncio
import random

import anthropic
import anyio
import pytest

from heddle.core.events import Retry
from heddle.core.messages import Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from heddle.core.messages import user_text
from heddle.model.anthropic_client import AnthropicModel
from tests.model import clients
from heddle.core.stream import AdaptiveThinking, BudgetThinking
from heddle.core.stream import (BlockDone, BlockStarted, ModelError, ModelRequest, Restart,
                                StreamEnd,
                                TextChunk, ThinkingChunk)
from heddle.model.retry import RetryPolicy
from tests.model.rawserver import (RawServer, Reply, Wait, Write, block_start, block_stop, delta,
                                   events_bytes, message_end, message_start, sse, text_answer,
                                   text_delta)

FAST = RetryPolicy(max_retries=3, base_delay=0.01, max_delay=0.05)
REQUEST = ModelRequest(model="m", system="sys", messages=(user_text("hi"),), max_tokens=100)


def model(url: str) -> AnthropicModel:
    return clients.model(FAST, random.Random(7), api_key="k", base_url=url, read_timeout=10)


async def collect(m: AnthropicModel, request: ModelRequest = REQUEST) -> list:
    with anyio.fail_after(10):
        return [ev async for ev in m.stream(request)]


def text_of(events: list) -> str:
    return "".join(e.text for e in events if isinstance(e, TextChunk))


def pieces(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


@pytest.mark.parametrize("nl", [b"\n", b"\r\n", b"\r"])
async def test_events_cut_anywhere_with_any_line_ending(nl):
    words = [f"word{i} " for i in range(40)]
    body = events_bytes(text_answer(*words), nl)
    body = body.replace(b"event: ping", b": keep-alive" + nl + b"event: ping")
    # Every few bytes in a write (and an HTTP chunk) of its own, so a CRLF is split too.
    async with RawServer([Reply([Write(p) for p in pieces(body, 7)], pause=0.0005)]) as srv:
        events = await collect(model(srv.url))
    assert text_of(events) == "".join(words)
    assert [e.block for e in events if isinstance(e, BlockDone)] == [TextBlock("".join(words))]
    end = events[-1]
    assert isinstance(end, StreamEnd) and end.stop_reason == "end_turn"
    assert (end.usage.input_tokens, end.usage.output_tokens) == (7, 11)


async def test_multi_line_data_pings_and_comments():
    body = (sse("message_start", message_start())
            + b": comment\n\nevent: ping\ndata: {\"type\": \"ping\"}\n\n"
            + sse("content_block_start", block_start(0, {"type": "text", "text": ""}))
            # JSON may break lines between tokens; multi-line data is joined with newlines.
            + b'event: content_block_delta\r\ndata: {"type": "content_block_delta",\r\n'
              b'data:  "index": 0,\r\ndata: "delta": {"type": "text_delta", "text": "a\\nb"}}\r\n\r\n'
            + events_bytes([block_stop(0), *message_end()]))
    async with RawServer([Reply([Write(body)])]) as srv:
        events = await collect(model(srv.url))
    assert text_of(events) == "a\nb"
    assert isinstance(events[-1], StreamEnd)


async def test_unknown_event_block_and_delta_types_are_ignored():
    events = [message_start(),
              {"type": "future_event", "data": [1, 2, 3]},
              block_start(0, {"type": "server_tool_use", "id": "s", "name": "web_search",
                              "input": {}}),
              delta(0, {"type": "input_json_delta", "partial_json": "{}"}),
              block_stop(0),
              block_start(1, {"type": "text", "text": ""}),
              text_delta(1, "cited "),
              delta(1, {"type": "citations_delta", "citation": {"cited_text": "x"}}),
              text_delta(1, "text"),
              block_stop(1), *message_end()]
    async with RawServer([Reply([Write(events_bytes(events))])]) as srv:
        out = await collect(model(srv.url))
    assert [e.block for e in out if isinstance(e, BlockDone)] == [TextBlock("cited text")]
    assert [e.kind for e in out if isinstance(e, BlockStarted)] == ["text"]
    assert isinstance(out[-1], StreamEnd)


async def test_deltas_that_arrive_together_come_out_as_one_chunk_and_none_wait():
    first, second = [f"a{i} " for i in range(50)], [f"b{i} " for i in range(50)]
    events = text_answer(*first, *second)
    head, rest = events[:2 + len(first)], events[2 + len(first):]
    got_first = asyncio.Event()
    reply = Reply([Write(*(sse(e["type"], e) for e in head)),  # 52 HTTP chunks in one write
                   Wait(got_first),
                   Write(*(sse(e["type"], e) for e in rest))])
    out = []
    async with RawServer([reply]) as srv:
        with anyio.fail_after(10):  # the second write waits for the first text to arrive
            async for ev in model(srv.url).stream(REQUEST):
                out.append(ev)
                if isinstance(ev, TextChunk):
                    got_first.set()
    assert [e.text for e in out if isinstance(e, TextChunk)] == ["".join(first), "".join(second)]
    assert isinstance(out[-1], StreamEnd)


async def test_thinking_deltas_are_merged_too():
    events = [message_start(),
              block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
              *(delta(0, {"type": "thinking_delta", "thinking": t}) for t in ("Let ", "me ", "see")),
              delta(0, {"type": "signature_delta", "signature": "c2ln"}),
              block_stop(0),
              block_start(1, {"type": "text", "text": ""}), text_delta(1, "Done."), block_stop(1),
              *message_end()]
    async with RawServer([Reply([Write(*(sse(e["type"], e) for e in events))])]) as srv:
        out = await collect(model(srv.url))
    assert [e for e in out if isinstance(e, ThinkingChunk)] == [ThinkingChunk(0, "Let me see")]
    assert [e.block for e in out if isinstance(e, BlockDone)] == [
        ThinkingBlock("Let me see", "c2ln"), TextBlock("Done.")]


OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


async def test_error_event_after_text_restarts_the_call():
    events = [message_start(), block_start(0, {"type": "text", "text": ""}),
              text_delta(0, "Done."), block_stop(0),
              block_start(1, {"type": "text", "text": ""}), text_delta(1, "more")]
    body = events_bytes(events, b"\r\n") + sse("error", OVERLOADED, b"\r\n")
    async with RawServer([Reply([Write(body)]), Reply([Write(events_bytes(text_answer("x")))])]
                         ) as srv:
        seen = await collect(model(srv.url))
        assert len(srv.bodies) == 2
    (restart,) = [i for i, e in enumerate(seen) if isinstance(e, Restart)]
    info = seen[restart].error
    assert (info.code, info.message, info.status, info.retryable) == (
        "overloaded", "Overloaded", None, True)
    assert text_of(seen[:restart]) == "Done.more"  # what the restart takes back
    assert isinstance(seen[restart + 1], Retry) and text_of(seen[restart:]) == "x"


async def test_error_event_after_text_fails_with_the_blocks_done_so_far():
    events = [message_start(), block_start(0, {"type": "text", "text": ""}),
              text_delta(0, "Done."), block_stop(0),
              block_start(1, {"type": "text", "text": ""}), text_delta(1, "more")]
    failing = events_bytes(events, b"\r\n") + sse("error", OVERLOADED, b"\r\n")
    async with RawServer([Reply([Write(failing)]) for _ in range(FAST.max_attempts)]) as srv:
        seen = []
        with pytest.raises(ModelError) as err:
            async for ev in model(srv.url).stream(REQUEST):
                seen.append(ev)
        assert len(srv.bodies) == FAST.max_attempts  # bounded: then it fails
    assert [e.attempt for e in seen if isinstance(e, Retry)] == [2, 3, 4]
    assert len([e for e in seen if isinstance(e, Restart)]) == 3
    assert err.value.info.code == "overloaded"
    assert err.value.partial == (TextBlock("Done."),)  # of the last attempt


async def test_error_event_that_is_not_json_before_any_content_is_retried():
    body = sse("message_start", message_start()) + b"event: error\ndata: oops\n\n"
    async with RawServer([Reply([Write(body)]),
                          Reply([Write(events_bytes(text_answer("fine")))])]) as srv:
        events = await collect(model(srv.url))
    retries = [e for e in events if isinstance(e, Retry)]
    assert [(r.error.code, r.error.message) for r in retries] == [("serverError", "oops")]
    assert text_of(events) == "fine" and events[-1].usage.model_calls == 2


async def test_a_body_that_stops_short_before_content_is_retried():
    cut = events_bytes(text_answer("lost"))[:-40]  # close-delimited: just ends, no error
    async with RawServer([Reply([Write(cut[:30])], chunked=False),
                          Reply([Write(events_bytes(text_answer("again")))])]) as srv:
        events = await collect(model(srv.url))
    assert [e.error.code for e in events if isinstance(e, Retry)] == ["streamInterrupted"]
    assert text_of(events) == "again"


async def test_a_body_that_stops_short_after_content_restarts_the_call():
    events = text_answer("kept")
    body = events_bytes(events[:4])  # the text block is done; no message_stop follows
    async with RawServer([Reply([Write(body)], chunked=False),
                          Reply([Write(events_bytes(text_answer("x")))])]) as srv:
        seen = await collect(model(srv.url))
        assert len(srv.bodies) == 2
    (restart,) = [e for e in seen if isinstance(e, Restart)]
    assert restart.error.code == "streamInterrupted"
    assert "no message_stop" in restart.error.message
    assert [e.block for e in seen if isinstance(e, BlockDone)] == [TextBlock("kept"),
                                                                    TextBlock("x")]


async def test_a_long_stream_keeps_every_character(scripted):
    text = "".join(random.Random(3).choice("abcdef \n{}\"é✓") for _ in range(60_000))
    scripted.add_scenario("s", {"steps": [{"content": [{"type": "text", "text": text}],
                                           "chunk": 7}]})
    events = await collect(model(scripted.url), ModelRequest("s", "", (user_text("x"),),
                                                             max_tokens=100_000))
    assert text_of(events) == text
    assert [e.block for e in events if isinstance(e, BlockDone)] == [TextBlock(text)]


async def test_the_request_the_endpoint_receives(scripted):
    scripted.add_scenario("s", {"steps": [{"content": [{"type": "text", "text": "ok"}]}]})
    scripted.add_scenario("s2", {"steps": [{"content": [{"type": "text", "text": "ok"}]}]})
    tools = ({"name": "Read", "description": "read a file",
              "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}},)
    messages = (user_text("read a.py"),
                Message("assistant", (ThinkingBlock("hm", "sig"),
                                      ToolUseBlock("toolu_1", "Read", {"path": "a.py"}))),
                Message("user", (ToolResultBlock("toolu_1", "print(1) — ✓"),)))
    request = ModelRequest("s", "be brief", messages, tools, max_tokens=2000,
                           thinking=BudgetThinking(1024))
    await collect(model(scripted.url), request)
    [sent] = scripted.requests_for("s")
    assert sent.body == {
        "model": "s", "max_tokens": 2000, "stream": True, "system": "be brief",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "read a.py"}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hm", "signature": "sig"},
                {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "a.py"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                          "content": "print(1) — ✓", "is_error": False}]}],
        "tools": list(tools),
        "thinking": {"type": "enabled", "budget_tokens": 1024}}
    # The same headers as the SDK's own `messages.create` sends (auth, version, ...).
    sdk = anthropic.AsyncAnthropic(api_key="k", base_url=scripted.url, max_retries=0,
                                   timeout=anthropic.Timeout(10, connect=10.0))
    stream = await sdk.messages.create(model="s2", max_tokens=10, stream=True,
                                       messages=[{"role": "user", "content": "x"}])
    async for _ in stream:
        pass
    await sdk.close()
    [direct] = scripted.requests_for("s2")
    skip = {"host", "content-length"}
    assert {k: v for k, v in sent.headers.items() if k not in skip} == {
        k: v for k, v in direct.headers.items() if k not in skip}
    assert sent.headers["content-type"] == "application/json"


async def test_adaptive_thinking_and_effort_are_sent_as_the_api_names_them(scripted):
    scripted.add_scenario("s", {"steps": [{"content": [{"type": "text", "text": "ok"}]}]})
    request = ModelRequest("s", "", (user_text("hi"),), max_tokens=3000,
                           thinking=AdaptiveThinking(), effort="low")
    await collect(model(scripted.url), request)
    [sent] = scripted.requests_for("s")
    assert sent.body["thinking"] == {"type": "adaptive"}
    assert sent.body["output_config"] == {"effort": "low"}


async def test_cancelling_mid_stream_closes_the_response():
    never = asyncio.Event()
    body = events_bytes(text_answer("a", "b")[:3])
    async with RawServer([Reply([Write(body), Wait(never)])]) as srv:
        m = model(srv.url)
        seen = []

        async def consume() -> None:
            async for ev in m.stream(REQUEST):
                seen.append(ev)

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(consume)
                while not any(isinstance(e, TextChunk) for e in seen):
                    await anyio.sleep(0.01)
                tg.cancel_scope.cancel()
        assert text_of(seen) == "a"


async def test_closing_the_stream_stops_reading_at_once():
    """The loop closes a model stream it stops consuming (`aclosing`); the response and its
    reader must be gone when `aclose` returns, not later in a task nobody awaits."""
    never = asyncio.Event()
    body = events_bytes(text_answer("a", "b")[:3])
    async with RawServer([Reply([Write(body), Wait(never)])]) as srv:
        m = model(srv.url)
        stream = m.stream(REQUEST)
        def readers() -> list[asyncio.Task]:
            return [t for t in asyncio.all_tasks() if "BodyReader._run" in repr(t.get_coro())]

        with anyio.fail_after(5):
            while not isinstance(await stream.__anext__(), TextChunk):
                pass
            assert len(readers()) == 1
            await stream.aclose()
        assert readers() == []
        never.set()
