"""Fixtures for the scripted model tests: a running server and the real SDK pointed at it."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import pytest

from heddle.scripted import ManualClock, ScriptedServer


@pytest.fixture
async def server() -> AsyncIterator[ScriptedServer]:
    async with ScriptedServer() as srv:
        yield srv


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def clocked(clock: ManualClock) -> AsyncIterator[ScriptedServer]:
    """A server whose prompt-cache lifetimes run on `clock`; pair it with `clocked_client`."""
    async with ScriptedServer(clock=clock) as srv:
        yield srv


@pytest.fixture
async def clocked_client(clocked: ScriptedServer) -> AsyncIterator[anthropic.AsyncAnthropic]:
    sdk = anthropic.AsyncAnthropic(base_url=clocked.url, api_key="test", max_retries=0)
    yield sdk
    await sdk.close()


@pytest.fixture
async def client(server: ScriptedServer) -> AsyncIterator[anthropic.AsyncAnthropic]:
    sdk = anthropic.AsyncAnthropic(base_url=server.url, api_key="test", max_retries=0)
    yield sdk
    await sdk.close()


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def text_step(text: str, **extra: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], **extra}


def expected_input_tokens(body: dict[str, Any]) -> int:
    """The documented estimate, computed independently of the server's code."""
    chars = sum(len(json.dumps(body[k], separators=(",", ":"), ensure_ascii=False))
                for k in ("system", "messages", "tools") if k in body)
    return math.ceil(chars / 4)
