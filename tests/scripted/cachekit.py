"""Helpers for the prompt-cache tests: requests big enough to cache, and the documented token
counts computed independently of the server's code (compact JSON, markers removed, / 4)."""

from __future__ import annotations

import json
import math
from typing import Any

EPHEMERAL = {"type": "ephemeral"}
HOUR = {"type": "ephemeral", "ttl": "1h"}
# Roughly 1250 tokens: over the 1024-token minimum on its own.
LONG = "Heddle reads the code, plans, and edits it with care. " * 92


def dump(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def clean(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [clean(v) for v in value]
    return value


def total_tokens(body: dict[str, Any]) -> int:
    body = clean(body)
    return math.ceil(sum(len(dump(body[k])) for k in ("tools", "system", "messages")
                         if k in body) / 4)


def prefix_tokens(body: dict[str, Any], location: str) -> int:
    """Tokens of tools → system → messages text through the end of the block at `location`.

    Message dicts must have "content" as their last key (the tests write them that way).
    """
    body = clean(body)
    section, *rest = location.split(".")
    text = ""
    for name in ("tools", "system"):
        if name == section:
            i = int(rest[0])
            return math.ceil(len(text + "[" + ",".join(dump(b) for b in body[name][:i + 1])) / 4)
        if name in body:
            text += dump(body[name])
    n, m = int(rest[0]), int(rest[2])
    messages = body["messages"]
    head = "[" + "".join(dump(message) + "," for message in messages[:n])
    cut = dict(messages[n], content=messages[n]["content"][:m + 1])
    return math.ceil(len(text + head + dump(cut)[:-2]) / 4)


def text(value: str, marker: dict[str, str] | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": value}
    if marker:
        block["cache_control"] = marker
    return block


def user(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def hello(times: int = 20) -> dict[str, Any]:
    return {"repeat": True, "steps": [{"content": [{"type": "text", "text": "ok"}]}] * times}
