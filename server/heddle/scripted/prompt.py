"""The prompt as the token estimate and the prompt cache see it: blocks, tools → system → messages.

`build_prompt` serializes a request to the compact JSON the estimate counts (`tools`, then
`system`, then `messages`), leaving out what the model does not see: every `cache_control`
marker (a prefix cached under a marker is read by a later request without one there), and the
thinking blocks the API strips, those of assistant turns before the last user message that is
not only tool results. Each block (a tool, a system block, a message content block) records
where it ends in that text and a digest of all the text up to that end, so two prompts share a
cached prefix exactly when their text agrees up to a block's end. The blocks that carry
`cache_control` are the breakpoints; `check_cache_control` rejects markers the API rejects.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import msgspec

__all__ = ["MAX_BREAKPOINTS", "Block", "Prompt", "build_prompt", "check_cache_control",
           "estimate_tokens"]

MAX_BREAKPOINTS = 4
_THINKING = ("thinking", "redacted_thinking")
_encode = msgspec.json.Encoder().encode


def estimate_tokens(chars: int) -> int:
    return math.ceil(chars / 4)


def _json(value: Any) -> str:
    return _encode(value).decode()


@dataclass(frozen=True)
class Block:
    """One block of the prompt. `end`: characters of the prompt text through this block."""

    location: str  # where it is in the request: "tools.0", "system.1", "messages.2.content.0"
    section: str  # "tools", "system" or "messages"
    end: int
    digest: bytes  # sha256 of the prompt text through this block
    ttl: str | None = None  # "5m" or "1h" when the block is a cache breakpoint
    cacheable: bool = True  # thinking blocks cannot carry a breakpoint


@dataclass(frozen=True)
class Prompt:
    blocks: tuple[Block, ...]
    chars: int
    # What else a cached messages prefix depends on: tool_choice, thinking, images anywhere.
    messages_context: bytes = b""

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.chars)

    def tokens_at(self, index: int) -> int:
        return estimate_tokens(self.blocks[index].end)

    @property
    def breakpoints(self) -> list[int]:
        return [i for i, block in enumerate(self.blocks) if block.ttl is not None]


def _last_turn_start(messages: list[Any]) -> int:
    """Index of the last user message that is not only tool results (-1: none)."""
    last = -1
    for n, message in enumerate(messages):
        if isinstance(message, dict) and message.get("role") == "user" \
                and _starts_a_turn(message.get("content")):
            last = n
    return last


def _starts_a_turn(content: Any) -> bool:
    if not isinstance(content, list):
        return True
    return any(not (isinstance(b, dict) and b.get("type") == "tool_result") for b in content)


def _is_thinking(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") in _THINKING


def _without_marker(block: Any) -> Any:
    """The block without cache_control, also inside a tool_result's content."""
    if not isinstance(block, dict):
        return block
    clean = {k: v for k, v in block.items() if k != "cache_control"}
    if isinstance(clean.get("content"), list):
        clean["content"] = [_without_marker(b) for b in clean["content"]]
    return clean


def _ttl(block: Any) -> str | None:
    marker = block.get("cache_control") if isinstance(block, dict) else None
    return (marker.get("ttl") or "5m") if isinstance(marker, dict) else None


class _Writer:
    """Accumulates the prompt text, its running digest and the blocks ending in it."""

    def __init__(self) -> None:
        self.chars = 0
        self.hash = hashlib.sha256()
        self.blocks: list[Block] = []

    def emit(self, text: str) -> None:
        self.chars += len(text)
        self.hash.update(text.encode())

    def block(self, location: str, section: str, value: Any) -> None:
        self.emit(_json(_without_marker(value)))
        self.blocks.append(Block(location, section, self.chars, self.hash.copy().digest(),
                                 _ttl(value), not _is_thinking(value)))

    def blocks_of(self, items: list[Any], location: str, section: str) -> None:
        self.emit("[")
        for i, (index, item) in enumerate(items):
            if i:
                self.emit(",")
            self.block(f"{location}.{index}", section, item)
        self.emit("]")


def build_prompt(body: dict[str, Any]) -> Prompt:
    """The prompt of a request that passed check_request (other input is serialized as is)."""
    out = _Writer()
    for section in ("tools", "system"):
        value = body.get(section)
        if isinstance(value, list):
            out.blocks_of(list(enumerate(value)), section, section)
        elif isinstance(value, str):
            out.block(section, section, value)
        elif value is not None:
            out.emit(_json(value))
    messages = body.get("messages")
    if isinstance(messages, list):
        _messages(out, messages)
    elif messages is not None:
        out.emit(_json(messages))
    blocks = _with_automatic_breakpoint(out.blocks, body.get("cache_control"))
    context = {"tool_choice": body.get("tool_choice"), "thinking": body.get("thinking"),
               "images": any(b.get("type") == "image" for b in _nested(messages))}
    return Prompt(tuple(blocks), out.chars, _encode(context))


def _messages(out: _Writer, messages: list[Any]) -> None:
    last = _last_turn_start(messages)
    out.emit("[")
    for n, message in enumerate(messages):
        if n:
            out.emit(",")
        if not isinstance(message, dict):
            out.emit(_json(message))
            continue
        out.emit("{")
        for j, (key, value) in enumerate(message.items()):
            out.emit(("," if j else "") + _json(key) + ":")
            where = f"messages.{n}.content"
            if key == "content" and isinstance(value, list):
                # The API strips the thinking of earlier turns; locations still count it.
                old = n < last and message.get("role") == "assistant"
                out.blocks_of([(m, b) for m, b in enumerate(value)
                               if not (old and _is_thinking(b))], where, "messages")
            elif key == "content" and isinstance(value, str):
                out.block(where, "messages", value)
            else:
                out.emit(_json(value))
        out.emit("}")
    out.emit("]")


def _nested(messages: Any) -> Iterator[dict[str, Any]]:
    for message in messages if isinstance(messages, list) else ():
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict):
                yield block
                inner = block.get("content")
                yield from (b for b in inner if isinstance(b, dict)) \
                    if isinstance(inner, list) else ()


def _with_automatic_breakpoint(blocks: list[Block], marker: Any) -> list[Block]:
    """Top-level cache_control puts a breakpoint on the last block that can carry one."""
    if not isinstance(marker, dict):
        return blocks
    for i in range(len(blocks) - 1, -1, -1):
        if blocks[i].cacheable:
            if blocks[i].ttl is None:
                blocks[i] = dataclasses.replace(blocks[i], ttl=marker.get("ttl") or "5m")
            break
    return blocks


# -- checks ------------------------------------------------------------------------------------

def _markable(body: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(location, block) for every block of the prompt in prefix order; a string is a block
    that carries no marker."""
    for section in ("tools", "system"):
        value = body.get(section)
        if isinstance(value, str):
            yield section, value
        for i, block in enumerate(value if isinstance(value, list) else ()):
            yield f"{section}.{i}", block
    messages = body.get("messages")
    for n, message in enumerate(messages if isinstance(messages, list) else ()):
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            yield f"messages.{n}.content", content
        for m, block in enumerate(content if isinstance(content, list) else ()):
            yield f"messages.{n}.content.{m}", block


def _check_marker(marker: Any, where: str) -> str | None:
    if not isinstance(marker, dict):
        return f"{where}: Input should be a valid dictionary"
    if marker.get("type") != "ephemeral":
        return f"{where}.type: Input should be 'ephemeral'"
    for key in marker:
        if key not in ("type", "ttl"):
            return f"{where}.ephemeral.{key}: Extra inputs are not permitted"
    if "ttl" in marker and marker["ttl"] not in ("5m", "1h"):
        return f"{where}.ephemeral.ttl: Input should be '5m' or '1h'"
    return None


def check_cache_control(body: dict[str, Any]) -> str | None:
    """The API's 400 message for a cache_control it refuses, or None."""
    found: list[tuple[str, str]] = []
    last_cacheable: tuple[str, Any] | None = None
    for location, block in _markable(body):
        if not _is_thinking(block):
            last_cacheable = (location, block)
        if not isinstance(block, dict) or block.get("cache_control") is None:
            continue
        kind = block.get("type")
        if kind in _THINKING:
            return f"{location}.{kind}.cache_control: Extra inputs are not permitted"
        error = _check_marker(block["cache_control"], f"{location}.cache_control")
        if error:
            return error
        found.append((location, block["cache_control"].get("ttl", "5m")))
    top = body.get("cache_control")
    if top is not None:
        error = _check_marker(top, "cache_control")
        if error:
            return error
        if last_cacheable and _ttl(last_cacheable[1]) is None:
            found.append((last_cacheable[0], top.get("ttl", "5m")))
    if len(found) > MAX_BREAKPOINTS:
        return (f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
                f"Found {len(found)}.")
    short_seen = False
    for location, ttl in found:
        if ttl == "5m":
            short_seen = True
        elif short_seen:
            return (f"{location}.cache_control.ttl: a ttl='1h' cache_control block must not "
                    "come after a ttl='5m' cache_control block. Note that blocks are processed "
                    "in the following order: `tools`, `system`, `messages`.")
    return None
