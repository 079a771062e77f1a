"""Turning a scenario step into a Messages API response: SSE events or one message JSON.

Pure functions: `render` applies the request's max_tokens and assigns tool ids, then
`sse_events` / `message_json` give the exact shapes the API sends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import msgspec

from .scenario import RedactedThinkingBlock, Step, TextBlock, ThinkingBlock, ToolUseBlock
from .validate import estimate_tokens

__all__ = ["Rendered", "encode_event", "error_body", "message_json", "render", "sse_events"]

_encode = msgspec.json.Encoder().encode

Event = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class Rendered:
    """What one response says, after truncation: API-shaped blocks, stop reason, usage."""

    blocks: tuple[dict[str, Any], ...]
    stop_reason: str
    stop_sequence: str | None
    output_tokens: int
    chunk: int


def _output_chars(block: dict[str, Any]) -> int:
    kind = block["type"]
    if kind == "text":
        return len(block["text"])
    if kind == "thinking":
        return len(block["thinking"])
    if kind == "tool_use":
        return len(_input_json(block["input"]))
    return len(block.get("data", ""))


def _input_json(value: dict[str, Any]) -> str:
    return _encode(value).decode() if value else ""


def _api_block(block: Any, new_tool_id: Callable[[], str]) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ThinkingBlock):
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if isinstance(block, RedactedThinkingBlock):
        return {"type": "redacted_thinking", "data": block.data}
    assert isinstance(block, ToolUseBlock)
    return {"type": "tool_use", "id": block.id or new_tool_id(), "name": block.name,
            "input": dict(block.input)}


def render(step: Step, *, max_tokens: int, new_tool_id: Callable[[], str]) -> Rendered:
    """Apply the output budget (max_tokens * 4 characters) to the step's content.

    Text and thinking that do not fit are cut at the budget; a tool_use that does not fit is
    dropped with everything after it. Either way the stop reason becomes max_tokens.
    """
    budget = max_tokens * 4
    used = 0
    blocks: list[dict[str, Any]] = []
    truncated = False
    for spec in step.content:
        block = _api_block(spec, new_tool_id)
        size = _output_chars(block)
        if used + size > budget:
            truncated = True
            room = budget - used
            if room > 0 and block["type"] in ("text", "thinking"):
                block[block["type"]] = block[block["type"]][:room]
                blocks.append(block)
                used += room
            break
        blocks.append(block)
        used += size
    stop_reason = "max_tokens" if truncated else step.resolved_stop_reason()
    return Rendered(
        blocks=tuple(blocks),
        stop_reason=stop_reason,
        stop_sequence=step.stop_sequence if stop_reason == "stop_sequence" else None,
        output_tokens=estimate_tokens(used),
        chunk=step.chunk,
    )


def _usage(input_usage: dict[str, Any], output_tokens: int) -> dict[str, Any]:
    return {**input_usage, "output_tokens": output_tokens}


def message_json(r: Rendered, *, message_id: str, model: str, usage: dict[str, Any],
                 context_management: dict[str, Any] | None = None) -> dict[str, Any]:
    """The whole message. `usage`: the input half (cache.CacheAccount.usage())."""
    message = {
        "id": message_id, "type": "message", "role": "assistant", "model": model,
        "content": list(r.blocks), "stop_reason": r.stop_reason,
        "stop_sequence": r.stop_sequence, "usage": _usage(usage, r.output_tokens),
    }
    if context_management is not None:
        message["context_management"] = context_management
    return message


def _pieces(text: str, size: int) -> Iterator[str]:
    for i in range(0, len(text), size):
        yield text[i:i + size]


def _empty(block: dict[str, Any]) -> dict[str, Any]:
    kind = block["type"]
    if kind == "text":
        return {"type": "text", "text": ""}
    if kind == "thinking":
        return {"type": "thinking", "thinking": "", "signature": ""}
    if kind == "tool_use":
        return {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
    return block


def _deltas(block: dict[str, Any], chunk: int) -> Iterator[dict[str, Any]]:
    kind = block["type"]
    if kind == "text":
        for piece in _pieces(block["text"], chunk):
            yield {"type": "text_delta", "text": piece}
    elif kind == "thinking":
        for piece in _pieces(block["thinking"], chunk):
            yield {"type": "thinking_delta", "thinking": piece}
        if block["signature"]:
            yield {"type": "signature_delta", "signature": block["signature"]}
    elif kind == "tool_use":
        # Like the API: an empty first fragment; a tool with no input sends only that one.
        yield {"type": "input_json_delta", "partial_json": ""}
        for piece in _pieces(_input_json(block["input"]), chunk):
            yield {"type": "input_json_delta", "partial_json": piece}


def sse_events(r: Rendered, *, message_id: str, model: str, usage: dict[str, Any],
               context_management: dict[str, Any] | None = None) -> list[Event]:
    """The stream: cache usage in message_start, context edits in the final message_delta."""
    start = message_json(r, message_id=message_id, model=model, usage=usage)
    start.update(content=[], stop_reason=None, stop_sequence=None, usage=_usage(usage, 0))
    events: list[Event] = [("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(r.blocks):
        events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                               "content_block": _empty(block)}))
        if index == 0:
            events.append(("ping", {"type": "ping"}))
        for delta in _deltas(block, r.chunk):
            events.append(("content_block_delta", {"type": "content_block_delta",
                                                   "index": index, "delta": delta}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    if not r.blocks:
        events.append(("ping", {"type": "ping"}))
    delta: dict[str, Any] = {
        "type": "message_delta",
        "delta": {"stop_reason": r.stop_reason, "stop_sequence": r.stop_sequence},
        "usage": _usage(usage, r.output_tokens),
    }
    if context_management is not None:
        delta["context_management"] = context_management
    events.append(("message_delta", delta))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def encode_event(name: str, data: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + _encode(data) + b"\n\n"


def error_body(error_type: str, message: str, request_id: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"type": "error", "error": {"type": error_type, "message": message}}
    if request_id:
        body["request_id"] = request_id
    return body
