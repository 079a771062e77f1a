"""Every fault a scenario can inject, and the exception the real SDK raises for it."""

from __future__ import annotations

import asyncio
import time

import anthropic
import httpx2
import pytest

from heddle.scripted import ScriptedServer

from .conftest import expected_input_tokens, text_step, user


@pytest.mark.parametrize(("status", "error_class", "error_type"), [
    (529, anthropic.OverloadedError, "overloaded_error"),
    (429, anthropic.RateLimitError, "rate_limit_error"),
    (500, anthropic.InternalServerError, "api_error"),
    (413, anthropic.ContentTooLargeError, "request_too_large"),
    (401, anthropic.AuthenticationError, "authentication_error"),
    (403, anthropic.PermissionDeniedError, "permission_error"),
    (400, anthropic.BadRequestError, "invalid_request_error"),
])
async def test_status_fault_raises_the_sdk_class(server: ScriptedServer, client, status,
                                                 error_class, error_type):
    server.add_scenario("s", {"steps": [{"fault": {"status": status}}, text_step("ok")]})
    with pytest.raises(error_class) as info:
        await client.messages.create(model="s", max_tokens=100, messages=user("hi"), stream=True)
    assert info.value.status_code == status
    assert info.value.type == error_type
    assert info.value.body["error"]["type"] == error_type
    assert server.requests[0].status == status


async def test_rate_limit_retry_after_header_is_visible(server: ScriptedServer, client):
    server.add_scenario("s", {"steps": [{"fault": {"status": 429, "retryAfter": 0.05,
                                                   "shouldRetry": True}}]})
    with pytest.raises(anthropic.RateLimitError) as info:
        await client.messages.create(model="s", max_tokens=100, messages=user("hi"))
    assert info.value.response.headers["retry-after"] == "0.05"
    assert info.value.response.headers["x-should-retry"] == "true"
    assert "retry-after-ms" not in info.value.response.headers


async def test_overload_retry_after_ms_header_is_visible(server: ScriptedServer, client):
    server.add_scenario("s", {"steps": [{"fault": {"status": 529, "retryAfterMs": 250,
                                                   "retryAfter": 1}}]})
    with pytest.raises(anthropic.OverloadedError) as info:
        await client.messages.create(model="s", max_tokens=100, messages=user("hi"))
    assert info.value.response.headers["retry-after-ms"] == "250"
    assert info.value.response.headers["retry-after"] == "1"


async def test_fault_times_consumes_that_many_requests(server: ScriptedServer, client):
    server.add_scenario("s", {"steps": [{"fault": {"status": 529, "times": 2}},
                                        text_step("after")]})
    for cursor_after in (0, 1):
        with pytest.raises(anthropic.OverloadedError):
            await client.messages.create(model="s", max_tokens=100, messages=user("hi"))
        assert server.cursor("s") == cursor_after
    message = await client.messages.create(model="s", max_tokens=100, messages=user("hi"))
    assert message.content[0].text == "after"
    assert [r.step_index for r in server.requests_for("s")] == [0, 0, 1]
    assert [r.status for r in server.requests_for("s")] == [529, 529, 200]


async def test_sdk_retries_honour_retry_after(server: ScriptedServer):
    server.add_scenario("s", {"steps": [{"fault": {"status": 529, "retryAfter": 0.05}},
                                        text_step("ok")]})
    async with anthropic.AsyncAnthropic(base_url=server.url, api_key="test",
                                        max_retries=1) as retrying:
        message = await retrying.messages.create(model="s", max_tokens=10, messages=user("x"))
    assert message.content[0].text == "ok"
    first, second = server.requests_for("s")
    assert second.headers["x-stainless-retry-count"] == "1"
    assert 0.04 < second.at - first.at < 2


async def test_prompt_too_long_fault(server: ScriptedServer, client):
    server.add_scenario("s", {"contextWindow": 1000,
                              "steps": [{"fault": {"status": 400, "promptTooLong": True}}]})
    with pytest.raises(anthropic.BadRequestError) as info:
        await client.messages.create(model="s", max_tokens=100, messages=user("hi"))
    tokens = expected_input_tokens(server.requests[0].body)
    assert info.value.type == "invalid_request_error"
    assert info.value.api_message == (
        f"prompt is too long: {tokens} tokens > 1000 maximum")


async def test_error_event_mid_stream(server: ScriptedServer, client):
    server.add_scenario("s", {"steps": [
        {**text_step("partial answer"), "chunk": 4,
         "fault": {"errorEvent": "overloaded_error", "afterEvents": 3}},
        text_step("next")]})
    seen = []
    stream = await client.messages.create(model="s", max_tokens=100, messages=user("hi"),
                                          stream=True)
    with pytest.raises(anthropic.APIStatusError) as info:
        async for ev in stream:
            seen.append(ev.type)
    # Three SSE events went out: message_start, content_block_start and the (hidden) ping.
    assert seen == ["message_start", "content_block_start"]
    assert type(info.value) is anthropic.APIStatusError
    assert info.value.type == "overloaded_error" and info.value.status_code == 200
    # The response ended properly: the kept-alive connection serves the next step.
    message = await client.messages.create(model="s", max_tokens=100, messages=user("hi"))
    assert message.content[0].text == "next"


async def test_error_event_without_stream_is_a_status(server: ScriptedServer, client):
    server.add_scenario("s", {"steps": [
        {**text_step("x"), "fault": {"errorEvent": "overloaded_error"}}]})
    with pytest.raises(anthropic.OverloadedError):
        await client.messages.create(model="s", max_tokens=100, messages=user("hi"))
    assert server.requests[0].status == 529


async def test_drop_mid_stream(server: ScriptedServer, client):
    server.add_scenario("s", {"steps": [
        {**text_step("partial answer"), "fault": {"drop": True, "afterEvents": 4}},
        text_step("next")]})
    stream = await client.messages.create(model="s", max_tokens=100, messages=user("hi"),
                                          stream=True)
    seen = []
    with pytest.raises(httpx2.RemoteProtocolError, match="incomplete chunked read"):
        async for ev in stream:
            seen.append(ev.type)
    assert seen == ["message_start", "content_block_start", "content_block_delta"]
    message = await client.messages.create(model="s", max_tokens=100, messages=user("hi"))
    assert message.content[0].text == "next"


async def test_drop_without_stream_is_a_connection_error(server: ScriptedServer, client):
    server.add_scenario("s", {"steps": [{**text_step("x"), "fault": {"drop": True}}]})
    with pytest.raises(anthropic.APIConnectionError):
        await client.messages.create(model="s", max_tokens=100, messages=user("hi"))
    assert server.requests[0].status == 0


async def test_stall_mid_stream_times_out_the_read(server: ScriptedServer, client):
    server.add_scenario("s", {"steps": [
        {**text_step("partial"), "fault": {"stall": 30, "afterEvents": 2}}, text_step("next")]})
    stream = await client.with_options(timeout=httpx2.Timeout(5, read=0.3)).messages.create(
        model="s", max_tokens=100, messages=user("hi"), stream=True)
    started = time.monotonic()
    with pytest.raises(httpx2.ReadTimeout):
        async for _ in stream:
            pass
    assert time.monotonic() - started < 15  # the 0.3 s read timeout, not the 30 s stall
    await stream.close()
    # The stalled handler notices the client has gone and frees its connection.
    for _ in range(100):
        if not server._connections:
            break
        await asyncio.sleep(0.02)
    message = await client.messages.create(model="s", max_tokens=100, messages=user("hi"))
    assert message.content[0].text == "next"


async def test_short_stall_then_close(server: ScriptedServer, client):
    server.add_scenario("s", {"steps": [{**text_step("x"), "fault": {"stall": 0.1,
                                                                      "afterEvents": 1}}]})
    stream = await client.messages.create(model="s", max_tokens=100, messages=user("hi"),
                                          stream=True)
    with pytest.raises(httpx2.RemoteProtocolError):
        async for _ in stream:
            pass


async def test_stall_without_stream_is_a_timeout(server: ScriptedServer, client):
    server.add_scenario("s", {"steps": [{**text_step("x"), "fault": {"stall": 30}}]})
    with pytest.raises(anthropic.APITimeoutError):
        await client.with_options(timeout=httpx2.Timeout(5, read=0.3)).messages.create(
            model="s", max_tokens=100, messages=user("hi"))
    assert server.requests[0].status == 0


async def test_end_early_mid_stream_ends_the_body_without_message_stop(server: ScriptedServer,
                                                                        client):
    server.add_scenario("s", {"steps": [
        {**text_step("partial answer"), "chunk": 4, "fault": {"endEarly": True, "afterEvents": 4}},
        {**text_step("x"), "fault": {"endEarly": True, "afterEvents": 99}},
        text_step("next")]})
    for expected in (["message_start", "content_block_start", "content_block_delta"],
                     ["message_start", "content_block_start", "content_block_delta",
                      "content_block_stop", "message_delta"]):
        stream = await client.messages.create(model="s", max_tokens=100, messages=user("hi"),
                                              stream=True)
        seen = [ev.type async for ev in stream]  # the body ends cleanly: the SDK raises nothing
        assert seen == expected  # afterEvents past the end still leaves out message_stop
    # The response ended properly: the kept-alive connection serves the next step.
    message = await client.messages.create(model="s", max_tokens=100, messages=user("hi"))
    assert message.content[0].text == "next"
    assert [r.status for r in server.requests_for("s")] == [200, 200, 200]


async def test_end_early_without_stream_closes_the_connection(server: ScriptedServer, client):
    server.add_scenario("s", {"steps": [{**text_step("x"), "fault": {"endEarly": True}}]})
    with pytest.raises(anthropic.APIConnectionError):
        await client.messages.create(model="s", max_tokens=100, messages=user("hi"))
