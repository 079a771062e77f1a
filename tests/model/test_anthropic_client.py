"""The model seam against every fault the scripted server injects, through the real SDK."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from heddle.core.events import Retry
from heddle.core.messages import TextBlock, ToolUseBlock, user_text
from heddle.model.anthropic_client import AnthropicModel
from tests.model import clients
from heddle.core.stream import (BlockDone, ModelError, ModelRequest, Restart, StreamEnd,
                                TextChunk)
from heddle.model.retry import RetryPolicy, parse_retry_after

FAST = RetryPolicy(max_retries=3, base_delay=0.01, max_delay=0.05)
HELLO = {"content": [{"type": "text", "text": "Hello there."}]}


def model(scripted, policy: RetryPolicy = FAST, read_timeout: float = 30) -> AnthropicModel:
    return clients.model(policy, random.Random(7), api_key="k", base_url=scripted.url,
                         read_timeout=read_timeout)


async def collect(m: AnthropicModel, name: str, text: str = "hi") -> list:
    req = ModelRequest(model=name, system="sys", messages=(user_text(text),), max_tokens=1000)
    return [ev async for ev in m.stream(req)]


async def test_text_and_tool_use_stream(scripted):
    scripted.add_scenario("s", {"steps": [{"content": [
        {"type": "text", "text": "Reading."},
        {"type": "tool_use", "name": "Read", "input": {"path": "a.py", "limit": 5}}], "chunk": 3}]})
    events = await collect(model(scripted), "s")
    assert "".join(e.text for e in events if isinstance(e, TextChunk)) == "Reading."
    done = [e.block for e in events if isinstance(e, BlockDone)]
    assert done[0] == TextBlock("Reading.")
    assert isinstance(done[1], ToolUseBlock) and done[1].input == {"path": "a.py", "limit": 5}
    end = events[-1]
    assert isinstance(end, StreamEnd) and end.stop_reason == "tool_use"
    assert end.usage.input_tokens > 0 and end.usage.output_tokens > 0
    assert end.usage.model_calls == 1


@pytest.mark.parametrize("status,code", [(529, "overloaded"), (429, "rateLimited"),
                                         (500, "serverError")])
async def test_retryable_status_then_success(scripted, status, code):
    scripted.add_scenario("s", {"steps": [{"fault": {"status": status, "times": 2}}, HELLO]})
    events = await collect(model(scripted), "s")
    retries = [e for e in events if isinstance(e, Retry)]
    assert [r.attempt for r in retries] == [2, 3]  # the number of the request about to be made
    assert all(r.error.code == code and r.error.status == status for r in retries)
    assert events[-1].usage.model_calls == 3
    assert len(scripted.requests_for("s")) == 3


async def test_retry_after_is_honoured(scripted):
    scripted.add_scenario("s", {"steps": [{"fault": {"status": 429, "retryAfter": 0.4}}, HELLO]})
    started = time.monotonic()
    events = await collect(model(scripted), "s")
    assert time.monotonic() - started >= 0.4
    assert [e.delay_ms for e in events if isinstance(e, Retry)] == [400]


async def test_retry_after_ms_wins_over_retry_after(scripted):
    # the real API sends both with 429 and 529; milliseconds are the finer of the two
    scripted.add_scenario("s", {"steps": [
        {"fault": {"status": 529, "retryAfterMs": 300, "retryAfter": 2}},
        {"fault": {"status": 429, "retryAfterMs": 120.5}}, HELLO]})
    events = await collect(model(scripted), "s")
    assert [e.delay_ms for e in events if isinstance(e, Retry)] == [300, 120]
    first, second, third = scripted.requests_for("s")
    assert 0.3 <= second.at - first.at < 2 and 0.12 <= third.at - second.at < 2


@pytest.mark.parametrize("headers", [{"retryAfterMs": 1500}, {"retryAfter": 1.5}])
async def test_a_retry_after_past_the_cap_fails_at_once(scripted, headers):
    policy = RetryPolicy(max_retries=3, base_delay=0.01, max_delay=0.05, max_retry_after=1.0)
    scripted.add_scenario("s", {"steps": [{"fault": {"status": 529, **headers}}, HELLO]})
    with pytest.raises(ModelError) as err:
        await collect(model(scripted, policy), "s")
    assert err.value.info.code == "overloaded"
    assert len(scripted.requests_for("s")) == 1


async def test_retries_are_bounded(scripted):
    scripted.add_scenario("s", {"steps": [{"fault": {"status": 529, "times": 100}}]})
    with pytest.raises(ModelError) as err:
        await collect(model(scripted), "s")
    assert err.value.info.code == "overloaded"
    assert len(scripted.requests_for("s")) == FAST.max_retries + 1


@pytest.mark.parametrize("fault,code", [
    ({"status": 400, "promptTooLong": True}, "promptTooLong"),
    ({"status": 413}, "promptTooLong"),
    ({"status": 401}, "authentication"),
    ({"status": 400}, "invalidRequest"),
    ({"status": 404}, "notFound"),  # not about the model: its message is not `model: NAME`
])
async def test_non_retryable_errors(scripted, fault, code):
    scripted.add_scenario("s", {"steps": [{"fault": fault}, HELLO]})
    with pytest.raises(ModelError) as err:
        await collect(model(scripted), "s")
    assert err.value.info.code == code and not err.value.info.retryable
    assert len(scripted.requests_for("s")) == 1


async def test_error_event_mid_stream_after_content_restarts_the_call(scripted):
    scripted.add_scenario("s", {"steps": [
        {"content": [{"type": "text", "text": "partial answer"}], "chunk": 2,
         "fault": {"errorEvent": "overloaded_error", "afterEvents": 4}}, HELLO]})
    seen = [ev async for ev in model(scripted).stream(ModelRequest("s", "", (user_text("x"),)))]
    kinds = [type(e).__name__ for e in seen]
    restart = kinds.index("Restart")
    assert any(isinstance(e, TextChunk) for e in seen[:restart])
    assert kinds[restart + 1] == "Retry" and seen[restart].error.code == "overloaded"
    assert "".join(e.text for e in seen[restart:] if isinstance(e, TextChunk)) == "Hello there."
    assert len(scripted.requests_for("s")) == 2


async def test_error_event_before_content_is_retried(scripted):
    scripted.add_scenario("s", {"steps": [
        {"content": [{"type": "text", "text": "lost"}],
         "fault": {"errorEvent": "overloaded_error", "afterEvents": 1}}, HELLO]})
    events = await collect(model(scripted), "s")
    assert [e.error.code for e in events if isinstance(e, Retry)] == ["overloaded"]
    assert not any(isinstance(e, Restart) for e in events)  # nothing was passed on
    assert "".join(e.text for e in events if isinstance(e, TextChunk)) == "Hello there."


async def test_dropped_connection_mid_stream(scripted):
    scripted.add_scenario("s", {"steps": [
        {"content": [{"type": "text", "text": "partial answer"}], "chunk": 2,
         "fault": {"drop": True, "afterEvents": 5, "times": FAST.max_attempts}}]})
    seen = []
    with pytest.raises(ModelError) as err:
        async for ev in model(scripted).stream(ModelRequest("s", "", (user_text("x"),))):
            seen.append(ev)
    assert err.value.info.code == "streamInterrupted"
    assert len([e for e in seen if isinstance(e, Restart)]) == FAST.max_retries
    assert len(scripted.requests_for("s")) == FAST.max_attempts


async def test_stall_hits_read_timeout(scripted):
    scripted.add_scenario("s", {"steps": [
        {"content": [{"type": "text", "text": "partial answer"}], "chunk": 2,
         "fault": {"stall": 20, "afterEvents": 4}}, HELLO]})
    started = time.monotonic()
    events = await collect(model(scripted, read_timeout=0.5), "s")
    (restart,) = [e for e in events if isinstance(e, Restart)]
    assert restart.error.code == "timeout"
    assert "".join(e.text for e in events[events.index(restart):]
                   if isinstance(e, TextChunk)) == "Hello there."
    assert time.monotonic() - started < 15  # the 0.5 s read timeout, not the 20 s stall


async def test_connection_refused_is_retried_then_fails(scripted):
    m = clients.model(FAST, api_key="k", base_url="http://127.0.0.1:9")
    with pytest.raises(ModelError) as err:
        await collect(m, "s")
    assert err.value.info.code == "connection"
    assert err.value.info.message == "cannot connect to http://127.0.0.1:9 (connection refused)"


async def test_an_unknown_host_is_named_with_the_resolvers_reason():
    m = clients.model(FAST, api_key="k", base_url="http://heddle-test.invalid:8080/v1")
    with pytest.raises(ModelError) as err:
        await collect(m, "s")
    assert err.value.info.message.startswith(
        "cannot connect to http://heddle-test.invalid:8080 (")
    assert "ssl:default" not in err.value.info.message


async def test_a_model_the_endpoint_does_not_know_is_named_with_those_it_serves(scripted):
    unknown = ("the model endpoint does not know the model 'claude-nonesuch' (it answered 404 "
               "\"model: claude-nonesuch\"): choose a model it serves")
    with pytest.raises(ModelError) as err:
        await collect(model(scripted), "claude-nonesuch")
    assert err.value.info.message == unknown  # it serves none: nothing to list
    for name in ("b-model", "a-model"):
        scripted.add_scenario(name, {"steps": [HELLO]})
    with pytest.raises(ModelError) as err:
        await collect(model(scripted), "claude-nonesuch")
    assert err.value.info.code == "unknownModel" and err.value.info.status == 404
    assert err.value.info.message == unknown + ": a-model, b-model"
    assert not err.value.info.retryable
    assert [r.path for r in scripted.requests] == ["/v1/messages", "/v1/models"] * 2


async def test_no_key_and_no_endpoint_is_a_clear_error():
    m = clients.model(FAST, api_key=None, base_url=None)
    with pytest.raises(ModelError, match="ANTHROPIC_API_KEY is not set"):
        await collect(m, "s")


def test_backoff_jitter_varies_within_its_range():
    # delay n = min(max_delay, base_delay * 2^(n-1)) * a uniform factor in [0.75, 1]
    policy = RetryPolicy(max_retries=10, base_delay=0.5, max_delay=4.0)
    rand = random.Random(3)
    for attempt in range(1, 8):
        full = min(4.0, 0.5 * 2 ** (attempt - 1))
        draws = [policy.delay(attempt, None, rand) for _ in range(40)]
        assert all(0.75 * full <= d <= full for d in draws)
        assert len(set(draws)) == len(draws)
        assert min(draws) < 0.8 * full and max(draws) > 0.95 * full
    assert [policy.delay(3, None, Fixed(r)) for r in (0.0, 0.5, 0.999)] == [
        1.5, 1.75, 2.0 * (0.75 + 0.25 * 0.999)]


class Fixed(random.Random):
    """A random source that always draws `value`."""

    def __init__(self, value: float):
        super().__init__()
        self.value = value

    def random(self) -> float:
        return self.value


def test_retry_after_headers_are_read_milliseconds_first():
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "3"}) == 0.25
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "soon", "retry-after": "2"}) == 2.0
    for odd in ({"retry-after-ms": "-5"}, {"retry-after": "nan"}, {},
                {"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}):  # then the usual backoff
        assert parse_retry_after(odd) is None
    assert parse_retry_after(None) is None


def test_backoff_is_exponential_with_jitter_and_capped():
    policy = RetryPolicy(max_retries=10, base_delay=0.5, max_delay=4.0)
    rand = random.Random(1)
    delays = [policy.delay(n, None, rand) for n in range(1, 7)]
    for n, d in enumerate(delays, 1):
        full = min(4.0, 0.5 * 2 ** (n - 1))
        assert 0.75 * full <= d <= full
    assert policy.delay(11, None, rand) is None
    assert policy.delay(1, 120.0, rand) is None  # a retry-after past the cap fails instead


async def test_warm_up_without_key_or_endpoint_leaves_the_error_to_the_first_call():
    m = clients.model(FAST, api_key=None, base_url=None)
    await m.warm_up()
    with pytest.raises(ModelError, match="ANTHROPIC_API_KEY is not set"):
        await collect(m, "s")


async def test_warm_up_and_first_calls_build_one_client(scripted):
    m = model(scripted)
    results = await asyncio.gather(m.warm_up(), m.client(), m.client(), m.warm_up(), m.client())
    built = [c for c in results if c is not None]
    assert len(built) == 3 and all(c is built[0] for c in built)
    assert await m.client() is built[0]
    scripted.add_scenario("s", {"steps": [HELLO]})
    events = await collect(m, "s")
    assert isinstance(events[-1], StreamEnd)


def test_the_http_client_comes_from_the_environment(caplog):
    from heddle.model.anthropic_client import ModelSettings

    assert ModelSettings.from_env({}).http_client == "aiohttp"
    assert ModelSettings.from_env({"HEDDLE_HTTP_CLIENT": "HTTPX"}).http_client == "httpx"
    assert ModelSettings.from_env({"HEDDLE_HTTP_CLIENT": "curl"}).http_client == "aiohttp"
    assert "HEDDLE_HTTP_CLIENT=curl is not one of aiohttp, httpx" in caplog.text
