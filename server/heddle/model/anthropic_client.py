"""The production model caller: the anthropic SDK streaming raw events, with our retry policy.

SDK retries are off; `RetryPolicy` decides, and each retry is reported as a `Retry` event.
A call is retried only while nothing of its response has been passed on.
"""

from __future__ import annotations

import importlib
import logging
import os
import random
from typing import Any, AsyncIterator

import anyio
import msgspec

from heddle.loop.events import ErrorInfo, Retry, Usage
from heddle.loop.messages import (Block, RedactedThinkingBlock, TextBlock, ThinkingBlock,
                                  ToolUseBlock, to_api)
from heddle.model.errors import StreamIncomplete, classify
from heddle.model.retry import RetryPolicy, parse_retry_after
from heddle.model.types import (BlockDone, BlockStarted, ModelError, ModelRequest, StreamEnd,
                                StreamEvent, TextChunk, ThinkingChunk)

log = logging.getLogger(__name__)

_import_lock = anyio.Lock()


async def import_sdk():
    """Import the anthropic SDK (about a second) in a worker thread, never on the event loop."""
    async with _import_lock:
        return await anyio.to_thread.run_sync(importlib.import_module, "anthropic")


class ModelSettings(msgspec.Struct, frozen=True):
    api_key: str | None
    base_url: str | None
    read_timeout: float = 120.0
    connect_timeout: float = 10.0

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> ModelSettings:
        env = os.environ if env is None else env
        return cls(
            api_key=env.get("ANTHROPIC_API_KEY") or None,
            base_url=env.get("ANTHROPIC_BASE_URL") or None,
            read_timeout=float(env.get("HEDDLE_READ_TIMEOUT", 120)),
        )


class _Builder:
    """Accumulates one content block from its deltas."""

    def __init__(self, kind: str, start: Any):
        self.kind = kind
        self.start = start
        self.parts: list[str] = []
        self.signature = ""

    def finish(self) -> tuple[Block, str | None]:
        text = "".join(self.parts)
        if self.kind == "tool_use":
            try:
                value = msgspec.json.decode(text) if text.strip() else {}
            except msgspec.DecodeError as exc:
                return ToolUseBlock(self.start.id, self.start.name, {}), f"invalid JSON: {exc}"
            if not isinstance(value, dict):
                return ToolUseBlock(self.start.id, self.start.name, {}), "input is not an object"
            return ToolUseBlock(self.start.id, self.start.name, value), None
        if self.kind == "thinking":
            return ThinkingBlock(text, self.signature), None
        if self.kind == "redacted_thinking":
            return RedactedThinkingBlock(self.start.data), None
        return TextBlock(text), None


class AnthropicModel:
    """ModelCaller over `anthropic.AsyncAnthropic`."""

    def __init__(self, settings: ModelSettings, policy: RetryPolicy = RetryPolicy(),
                 rand: random.Random | None = None):
        self.settings = settings
        self.policy = policy
        self.rand = rand or random.Random()
        self._client = None

    async def client(self):
        if self._client is None:
            anthropic = await import_sdk()
            s = self.settings
            if s.api_key is None and s.base_url is None:
                raise ModelError(ErrorInfo(
                    "authentication",
                    "ANTHROPIC_API_KEY is not set (or set ANTHROPIC_BASE_URL to an "
                    "Anthropic-compatible endpoint)"))
            self._client = anthropic.AsyncAnthropic(
                api_key=s.api_key or "none", base_url=s.base_url, max_retries=0,
                timeout=anthropic.Timeout(s.read_timeout, connect=s.connect_timeout))
        return self._client

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        client = await self.client()
        attempt = 0
        while True:
            committed = False
            done: list[Block] = []
            try:
                async for event in self._one_attempt(client, request, attempt + 1, done):
                    committed = True
                    yield event
                return
            except anyio.get_cancelled_exc_class():
                raise
            except ModelError:
                raise
            except Exception as exc:  # every failure of the call is classified here
                info = classify(exc)
                log.warning("model call failed (attempt %d): %s", attempt + 1, info.message)
                retry_after = parse_retry_after(getattr(getattr(exc, "response", None),
                                                        "headers", None))
                delay = None
                if info.retryable and not committed:
                    delay = self.policy.delay(attempt + 1, retry_after, self.rand)
                if delay is None:
                    raise ModelError(info, tuple(done)) from exc
                attempt += 1
                yield Retry(attempt, self.policy.max_retries, int(delay * 1000), info)
                await anyio.sleep(delay)

    async def _one_attempt(self, client, request: ModelRequest, calls: int,
                           done: list[Block]) -> AsyncIterator[StreamEvent]:
        kwargs: dict[str, Any] = dict(
            model=request.model, max_tokens=request.max_tokens,
            messages=to_api(request.messages), stream=True)
        if request.system:
            kwargs["system"] = request.system
        if request.tools:
            kwargs["tools"] = list(request.tools)
        if request.thinking_budget:
            kwargs["thinking"] = {"type": "enabled", "budget_tokens": request.thinking_budget}
        stream = await client.messages.create(**kwargs)
        builders: dict[int, _Builder] = {}
        usage_in: Any = None
        output_tokens = 0
        stop_reason = None
        saw_stop = False
        try:
            async for ev in stream:
                kind = ev.type
                if kind == "message_start":
                    usage_in = ev.message.usage
                elif kind == "content_block_start":
                    block = ev.content_block
                    builders[ev.index] = _Builder(block.type, block)
                    if block.type == "tool_use":
                        yield BlockStarted(ev.index, block.type, block.id, block.name)
                    else:
                        yield BlockStarted(ev.index, block.type)
                elif kind == "content_block_delta":
                    delta = ev.delta
                    b = builders[ev.index]
                    if delta.type == "text_delta":
                        b.parts.append(delta.text)
                        yield TextChunk(ev.index, delta.text)
                    elif delta.type == "input_json_delta":
                        b.parts.append(delta.partial_json)
                    elif delta.type == "thinking_delta":
                        b.parts.append(delta.thinking)
                        yield ThinkingChunk(ev.index, delta.thinking)
                    elif delta.type == "signature_delta":
                        b.signature += delta.signature
                elif kind == "content_block_stop":
                    block, error = builders.pop(ev.index).finish()
                    done.append(block)
                    yield BlockDone(ev.index, block, error)
                elif kind == "message_delta":
                    stop_reason = ev.delta.stop_reason
                    if ev.usage is not None:
                        output_tokens = ev.usage.output_tokens or 0
                elif kind == "message_stop":
                    saw_stop = True
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                await stream.close()
        if not saw_stop:
            raise StreamIncomplete("no message_stop")
        yield StreamEnd(stop_reason, Usage(
            input_tokens=getattr(usage_in, "input_tokens", 0) or 0,
            output_tokens=output_tokens,
            cache_read_input_tokens=getattr(usage_in, "cache_read_input_tokens", 0) or 0,
            cache_creation_input_tokens=getattr(usage_in, "cache_creation_input_tokens", 0) or 0,
            model_calls=calls))
