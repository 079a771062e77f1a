"""The production model caller: the Messages API through the anthropic SDK's client, with our
retry policy.

The SDK sends the request (auth, base URL, version headers, timeouts) and raises its
`APIStatusError` classes for error statuses; the body is encoded with msgspec, and the streamed
answer is read as bytes (`reader`) and decoded here (`sse`), not into the SDK's event objects.

SDK retries are off; `RetryPolicy` decides, and each retry is reported as a `Retry` event.
A call whose response broke off after some of it was passed on is retried too: a `Restart`
first says that what was passed on is void.
"""

from __future__ import annotations

import importlib
import logging
import os
import random
from contextlib import aclosing
from typing import Any, AsyncIterator

import anyio
import msgspec

from heddle.core.events import ErrorInfo, Retry, Usage
from heddle.core.messages import Block, ToolUseBlock
from heddle.core.stream import (Billed, ModelError, ModelRequest, Restart, StreamEnd,
                                StreamEvent)
from heddle.envvars import NO_ENDPOINT, http_url, number
from heddle.model import caching
from heddle.model.errors import classify
from heddle.model.reader import BodyReader
from heddle.model.retry import RetryPolicy, parse_retry_after
from heddle.model.sse import Assembler, SSEDecoder

log = logging.getLogger(__name__)

_import_lock = anyio.Lock()


async def import_sdk():
    """Import the anthropic SDK (about a second) in a worker thread, never on the event loop."""
    async with _import_lock:
        return await anyio.to_thread.run_sync(importlib.import_module, "anthropic")


HTTP_CLIENTS = ("aiohttp", "httpx")
"""The SDK's two HTTP clients. aiohttp (the SDK's `aiohttp` extra) parses a streamed answer in
C, about a third of the CPU of httpx2 per streamed event; httpx2 is the SDK's default."""


class ModelSettings(msgspec.Struct, frozen=True):
    api_key: str | None
    base_url: str | None
    read_timeout: float = 120.0
    connect_timeout: float = 10.0
    http_client: str = "aiohttp"
    retry_delay: float = RetryPolicy().base_delay
    """Seconds before the first retry of a failed request (doubled for each later one)."""

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> ModelSettings:
        env = os.environ if env is None else env
        http_client = (env.get("HEDDLE_HTTP_CLIENT") or "aiohttp").lower()
        if http_client not in HTTP_CLIENTS:
            log.warning("HEDDLE_HTTP_CLIENT=%s is not one of %s; using aiohttp",
                        http_client, ", ".join(HTTP_CLIENTS))
            http_client = "aiohttp"
        return cls(
            api_key=env.get("ANTHROPIC_API_KEY") or None,
            base_url=http_url(env, "ANTHROPIC_BASE_URL"),
            read_timeout=number(env, "HEDDLE_READ_TIMEOUT", 120, minimum=0.001),
            http_client=http_client,
            retry_delay=number(env, "HEDDLE_RETRY_DELAY", RetryPolicy().base_delay),
        )


class AnthropicModel:
    """ModelCaller over `anthropic.AsyncAnthropic`; `warm_up` prepares it off the event loop."""

    def __init__(self, settings: ModelSettings, policy: RetryPolicy | None = None,
                 rand: random.Random | None = None):
        self.settings = settings
        self.policy = policy or RetryPolicy(base_delay=settings.retry_delay)
        self.rand = rand or random.Random()
        self._client = None
        self._client_lock = anyio.Lock()

    def _no_endpoint(self) -> bool:
        return self.settings.api_key is None and self.settings.base_url is None

    async def warm_up(self) -> None:
        """Import the SDK and build the client in worker threads, before the first turn needs them.

        Never raises: without an API key, or if building fails, the first turn reports it.
        """
        try:
            await import_sdk()
            if not self._no_endpoint():
                await self.client()
        except Exception as exc:  # the first turn meets the same error and reports it
            log.warning("model client warm-up failed: %s", exc)

    async def client(self):
        if self._client is None:
            anthropic = await import_sdk()
            if self._no_endpoint():
                raise ModelError(ErrorInfo("authentication", NO_ENDPOINT))
            async with self._client_lock:
                if self._client is None:
                    # 90-100 ms, most of it the TLS context: not on the event loop.
                    self._client = await anyio.to_thread.run_sync(self._build, anthropic)
        return self._client

    async def aclose(self) -> None:
        """Close the client's connections (the daemon exits without: the OS closes them)."""
        client, self._client = self._client, None
        if client is not None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                await client.close()

    def _build(self, anthropic):
        s = self.settings
        timeout = anthropic.Timeout(s.read_timeout, connect=s.connect_timeout)
        http_client = None  # the SDK's default: httpx2
        if s.http_client == "aiohttp":
            try:
                http_client = anthropic.DefaultAioHttpClient(timeout=timeout)
            except RuntimeError as exc:  # the SDK's aiohttp extra is not installed
                log.warning("%s; using the SDK's default HTTP client", exc)
        return anthropic.AsyncAnthropic(
            api_key=s.api_key or "none", base_url=s.base_url, max_retries=0, timeout=timeout,
            http_client=http_client)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        client = await self.client()
        attempt = 0
        spent = Usage()  # what the attempts that failed reported: billed too, so counted
        while True:
            committed = False
            done: list[Block] = []
            assembler = Assembler(done)
            try:
                async with aclosing(self._one_attempt(client, request, attempt + 1,
                                                      assembler)) as events:
                    async for event in events:
                        committed = committed or not isinstance(event, Billed)  # shown
                        if isinstance(event, StreamEnd):
                            event = msgspec.structs.replace(event, usage=event.usage + spent)
                        elif isinstance(event, Billed):  # every request so far, this one too
                            event = Billed(msgspec.structs.replace(
                                event.usage + spent, model_calls=attempt + 1))
                        yield event
                return
            except anyio.get_cancelled_exc_class():
                raise
            except ModelError:
                raise
            except Exception as exc:  # every failure of the call is classified here
                spent += assembler.usage()
                info = classify(exc)
                if info.code == "unknownModel":
                    info = await served_models(client, info)
                log.warning("model call failed (attempt %d): %s", attempt + 1, info.message)
                retry_after = parse_retry_after(getattr(getattr(exc, "response", None),
                                                        "headers", None))
                delay = None
                if info.retryable:
                    delay = self.policy.delay(attempt + 1, retry_after, self.rand)
                if delay is None:
                    raise ModelError(info, tuple(done), spent) from exc
                attempt += 1
                if committed:
                    yield Restart(info)
                # `attempt + 1`: the number of the request about to be made, the first one 1
                yield Retry(attempt + 1, self.policy.max_attempts, int(delay * 1000), info)
                await anyio.sleep(delay)

    async def _one_attempt(self, client, request: ModelRequest, calls: int,
                           assembler: Assembler) -> AsyncIterator[StreamEvent]:
        import anthropic
        import httpx2

        # The SDK's documented way to send a request it does not build: with
        # `cast_to=httpx2.Response` it hands back the response unread, after the same headers,
        # auth and timeouts as `messages.create`; an error status still raises its APIStatusError.
        response = await client.post("/v1/messages", cast_to=httpx2.Response,
                                     content=request_body(request), stream=True,
                                     options={"headers": request_headers(request)})
        decoder = SSEDecoder()
        billed = False
        try:
            async with BodyReader(_body_chunks(response)) as reader:
                while (data := await reader.take()) is not None:
                    for event in assembler.feed(decoder.feed(data)):
                        yield event
                    if not billed and assembler.started:
                        billed = True
                        yield Billed(assembler.usage())
                    if assembler.failure is not None:
                        raise assembler.failure
                    if assembler.error is not None:
                        # What the SDK raises for an `error` event: the base class, status 200.
                        raise anthropic.APIStatusError(assembler.error.message,
                                                       response=response,
                                                       body=assembler.error.body)
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                await response.aclose()
        yield assembler.end(calls)


MODELS_SHOWN = 20
MODELS_TIMEOUT = 5.0
"""Seconds the endpoint gets to list its models after it refused one."""


async def served_models(client, info: ErrorInfo) -> ErrorInfo:
    """`info` (an unknown model) naming the models the endpoint serves, when it lists them
    (`GET /v1/models`) within MODELS_TIMEOUT; else `info` as it is: an endpoint without that
    list (many compatible ones) still gets the error it caused."""
    try:
        with anyio.fail_after(MODELS_TIMEOUT):
            page = await client.models.list(limit=100)
        names = [model.id for model in page.data]
    except Exception as exc:  # any failure: the refusal is what matters, said as it is
        log.info("the model endpoint did not list its models: %s", exc)
        return info
    if not names:
        return info
    shown = ", ".join(names[:MODELS_SHOWN]) + (
        f" and {len(names) - MODELS_SHOWN} more" if len(names) > MODELS_SHOWN else "")
    return msgspec.structs.replace(info, message=f"{info.message}: {shown}")


def _body_chunks(response) -> AsyncIterator[bytes]:
    """The body's bytes; without a content encoding, skipping the decoders' layer per chunk
    (with aiohttp, each piece is whatever arrived, up to 16 KiB: many events at once)."""
    if response.headers.get("content-encoding", "identity").lower() == "identity":
        return response.aiter_raw()
    return response.aiter_bytes()


CONTEXT_MANAGEMENT_BETA = "context-management-2025-06-27"
EXTENDED_TTL_BETA = "extended-cache-ttl-2025-04-11"
"""The 1-hour lifetime was a beta under this name; the API still accepts the header, and
endpoints that follow the older docs need it."""


def request_headers(request: ModelRequest) -> dict[str, str]:
    betas = ([CONTEXT_MANAGEMENT_BETA] if request.clear_tool_uses else []) + (
        [EXTENDED_TTL_BETA] if request.cache_ttl == "1h" else [])
    return {"anthropic-beta": ",".join(betas)} if betas else {}


def request_body(request: ModelRequest) -> bytes:
    """The Messages API request body: msgspec encodes the message Structs directly, where the
    SDK would deep-copy the whole history and encode it with `json` (milliseconds per call).

    With `cache_ttl`, breakpoints go where `heddle.model.caching` says: the system prompt is
    then sent as one text block, so that it can carry the stable prefix's breakpoint."""
    ttl = request.cache_ttl
    messages: Any = request.messages
    system: Any = request.system
    tools: Any = request.tools
    if ttl is not None:
        stable = 1 if (system or tools) else 0
        positions = caching.message_breakpoints(request.messages,
                                                caching.MAX_BREAKPOINTS - stable)
        messages = caching.marked_messages(request.messages, positions, ttl)
        if system:
            system = [{"type": "text", "text": system, "cache_control": caching.marker(ttl)}]
        elif tools:
            tools = [*tools[:-1], {**tools[-1], "cache_control": caching.marker(ttl)}]
    body: dict[str, Any] = {"model": request.model, "max_tokens": request.max_tokens,
                            "messages": messages, "stream": True}
    if system:
        body["system"] = system
    if tools:
        body["tools"] = tools
    if request.thinking is not None:
        body["thinking"] = request.thinking
    if request.effort is not None:
        body["output_config"] = {"effort": request.effort}
    if request.clear_tool_uses:
        body["context_management"] = {"edits": [{
            "type": "clear_tool_uses_20250919",
            # the oldest `clear_tool_uses` are cleared: the rest are kept, and the trigger
            # always fires (the loop decides when clearing is worth its cache re-write)
            "trigger": {"type": "tool_uses", "value": request.clear_tool_uses},
            "keep": {"type": "tool_uses", "value": _tool_uses(request) - request.clear_tool_uses},
        }]}
    return msgspec.json.encode(body)


def _tool_uses(request: ModelRequest) -> int:
    return sum(1 for m in request.messages if m.role == "assistant"
               for b in m.content if isinstance(b, ToolUseBlock))
