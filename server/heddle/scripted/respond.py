"""Choosing and sending a response: the scenario cursor, error replies, streams with faults.

`advance` is the pure cursor transition; `send_error`, `send_json` and `send_step` do the I/O.
Each sender returns whether the connection may serve another request.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import msgspec

from .events import Rendered, encode_event, error_body, message_json, sse_events
from .scenario import ERROR_TYPES, Fault, Scenario, Step, error_type_for
from .wire import ChunkedResponse, drain, response_head

__all__ = [
    "Cursor", "StepReply", "advance", "default_message", "fault_headers", "planned_status",
    "send_error", "send_json", "send_step",
]

_encode = msgspec.json.Encoder().encode
_STATUS_FOR_TYPE = {v: k for k, v in ERROR_TYPES.items()}
_DEFAULT_MESSAGES = {
    "invalid_request_error": "Invalid request",
    "authentication_error": "invalid x-api-key",
    "permission_error": "Your API key does not have permission to use the specified resource.",
    "not_found_error": "Not found",
    "request_too_large": "Request exceeds the maximum allowed number of bytes.",
    "rate_limit_error": "Number of request tokens has exceeded your per-minute rate limit",
    "api_error": "Internal server error",
    "overloaded_error": "Overloaded",
}


def default_message(error_type: str) -> str:
    return _DEFAULT_MESSAGES.get(error_type, "Error")


@dataclass(frozen=True)
class Cursor:
    """Where a scenario is: the step the next request gets, and how often it has answered."""

    step: int = 0
    hits: int = 0


def advance(name: str, scenario: Scenario, cursor: Cursor, last_user: str,
            ) -> tuple[int | None, Step | str, Cursor]:
    """Pick the step for one request: (step index, the step or an error message, new cursor).

    A request the step rejects (no step left, `match` not met) leaves the cursor unchanged.
    """
    steps = scenario.steps
    index = cursor.step % len(steps) if scenario.repeat else cursor.step
    if index >= len(steps):
        return None, (f"scripted scenario '{name}' has no step {index} "
                      f"(it has {len(steps)})"), cursor
    step = steps[index]
    if step.match and step.match.last_user_contains not in last_user:
        return index, (f"scripted scenario '{name}' step {index} expected the last user message "
                       f"to contain {step.match.last_user_contains!r}"), cursor
    hits = cursor.hits + 1
    after = Cursor(index, hits) if hits < step.times else Cursor(index + 1, 0)
    return index, step, after


def planned_status(fault: Fault | None, stream: bool) -> int:
    """The status a step's reply will send; 0 when the connection closes before any."""
    if fault is None or stream:
        return 200
    if fault.error_event is not None:
        return _STATUS_FOR_TYPE.get(fault.error_event, 500)
    return 0


def _common(request_id: str, keep_alive: bool) -> list[tuple[str, str]]:
    return [("request-id", request_id), ("connection", "keep-alive" if keep_alive else "close")]


async def send_json(writer: asyncio.StreamWriter, status: int, body: Any, *, request_id: str,
                    keep_alive: bool, headers: list[tuple[str, str]] = ()) -> bool:
    data = _encode(body)
    writer.write(response_head(status, [
        ("content-type", "application/json"), ("content-length", str(len(data))),
        *_common(request_id, keep_alive), *headers]) + data)
    await drain(writer)
    return keep_alive


async def send_error(writer: asyncio.StreamWriter, status: int, message: str, *, request_id: str,
                     keep_alive: bool, headers: list[tuple[str, str]] = ()) -> bool:
    body = error_body(error_type_for(status), message, request_id)
    return await send_json(writer, status, body, request_id=request_id, keep_alive=keep_alive,
                           headers=headers)


def fault_headers(fault: Fault) -> list[tuple[str, str]]:
    headers = []
    for name, value in (("retry-after", fault.retry_after),
                        ("retry-after-ms", fault.retry_after_ms)):
        if value is not None:
            headers.append((name, str(int(value)) if value == int(value) else repr(value)))
    if fault.should_retry is not None:
        headers.append(("x-should-retry", "true" if fault.should_retry else "false"))
    return headers


@dataclass(frozen=True)
class StepReply:
    step: Step
    rendered: Rendered
    stream: bool
    model: str
    usage: dict[str, Any]  # the input half of `usage`, cache fields included
    message_id: str
    request_id: str
    context_management: dict[str, Any] | None = None


async def send_step(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    reply: StepReply, keep_alive: bool) -> bool:
    fault = reply.step.fault
    if not reply.stream:
        return await _send_message(reader, writer, reply, fault, keep_alive)
    events = sse_events(reply.rendered, message_id=reply.message_id, model=reply.model,
                        usage=reply.usage, context_management=reply.context_management)
    body = ChunkedResponse(writer)
    await body.start(200, [("content-type", "text/event-stream"), ("cache-control", "no-cache"),
                           *_common(reply.request_id, keep_alive)])
    # endEarly always leaves something out: at least the final message_stop
    last = len(events) - 1 if fault and fault.end_early else len(events)
    fire_at = min(fault.after_events, last) if fault else -1
    delay = reply.step.delay_ms / 1000
    for i in range(len(events) + 1):
        if i == fire_at:
            assert fault is not None
            if fault.end_early:
                break
            if fault.error_event is None:
                await _cut(reader, writer, fault)
                return False
            message = fault.message or default_message(fault.error_event)
            await body.send(encode_event("error", error_body(fault.error_event, message)))
            break
        if i == len(events):
            break
        if delay and i:
            await asyncio.sleep(delay)
        await body.send(encode_event(*events[i]))
    await body.end()
    return keep_alive


async def _send_message(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                        reply: StepReply, fault: Fault | None, keep_alive: bool) -> bool:
    if fault and fault.error_event is not None:
        # Without a stream there is no error event: the API answers with the error's status.
        status = planned_status(fault, stream=False)
        message = fault.message or default_message(fault.error_event)
        body = error_body(fault.error_event, message, reply.request_id)
        return await send_json(writer, status, body, request_id=reply.request_id,
                               keep_alive=keep_alive)
    if fault:
        await _cut(reader, writer, fault)
        return False
    body = message_json(reply.rendered, message_id=reply.message_id, model=reply.model,
                        usage=reply.usage, context_management=reply.context_management)
    return await send_json(writer, 200, body, request_id=reply.request_id,
                           keep_alive=keep_alive)


async def _cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, fault: Fault) -> None:
    """Drop the connection now, or after stalling `fault.stall` seconds or until EOF."""
    if fault.stall is not None:
        deadline = time.monotonic() + fault.stall
        while (left := deadline - time.monotonic()) > 0:
            try:
                if not await asyncio.wait_for(reader.read(4096), left):
                    break  # the client went away
            except (TimeoutError, ConnectionError):
                break
    writer.close()  # flushes what was sent, then closes mid-body
