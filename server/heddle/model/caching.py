"""Where a request's prompt-cache breakpoints go, designed for an agent loop.

The Messages API caches a request's prompt in the order tools → system → messages; a
`cache_control` breakpoint caches everything up to and including its block, a later request
reads the longest cached prefix that it finds looking back at most 20 blocks from one of its
breakpoints, and a request may carry at most 4 (docs/performance.md, "Prompt caching"). In an
agent loop each call sends the previous call's prompt plus the answer and the tool results, so:

    stable    the end of tools + system: read by every call of the session, also after a
              compaction or a snip rewrote the messages
    previous  the end of the previous call's prompt: the last block of the last user message
              before the last assistant message. This call finds that prefix at the breakpoint
              itself, however many blocks the answer and its (parallel) tool results added
    newest    the last block of the newest message: what the next call will find as its
              `previous`
    turn      when the API strips the thinking of earlier turns from the prompt, the cached
              prefixes that held that thinking no longer match: a breakpoint just before the
              first stripped thinking block reads what still does
    lookback  slots left over go between the newest breakpoint and the one before it when they
              are more than 20 blocks apart, so a prefix cached in between is still found

`message_breakpoints` is the pure placement; `request_body` (anthropic_client) applies it.
"""

from __future__ import annotations

from typing import Any

import msgspec

from heddle.core.messages import (THINKING_TYPES, Message, ToolResultBlock)

__all__ = ["LIFETIME_SECONDS", "LOOKBACK", "MAX_BREAKPOINTS", "marker", "marked_messages", "message_breakpoints"]

MAX_BREAKPOINTS = 4
LOOKBACK = 20
LIFETIME_SECONDS = {"5m": 300.0, "1h": 3600.0}
Position = tuple[int, int]  # (message index, block index)


def marker(ttl: str) -> dict[str, str]:
    return {"type": "ephemeral", "ttl": "1h"} if ttl == "1h" else {"type": "ephemeral"}


def _starts_turn(message: Message) -> bool:
    return message.role == "user" and any(not isinstance(b, ToolResultBlock)
                                          for b in message.content)


def _last_markable(messages: tuple[Message, ...], n: int) -> Position | None:
    """The last block of message n that can carry a breakpoint (thinking blocks cannot)."""
    for m in range(len(messages[n].content) - 1, -1, -1):
        if not isinstance(messages[n].content[m], THINKING_TYPES):
            return n, m
    return None


def _before_stripped_thinking(messages: tuple[Message, ...]) -> Position | None:
    """The markable block just before the first thinking block the API strips: those of
    assistant messages before the last user message that starts a turn."""
    last_turn = max((n for n, m in enumerate(messages) if _starts_turn(m)), default=-1)
    for n in range(last_turn):
        message = messages[n]
        if message.role != "assistant":
            continue
        for m, block in enumerate(message.content):
            if isinstance(block, THINKING_TYPES):  # the first one: no block before it is
                if m > 0:
                    return n, m - 1
                return _last_markable(messages, n - 1) if n > 0 else None
    return None


def _previous_end(messages: tuple[Message, ...]) -> Position | None:
    """Where the previous call's prompt ended: the last user message before the last
    assistant message."""
    for a in range(len(messages) - 1, -1, -1):
        if messages[a].role == "assistant":
            for u in range(a - 1, -1, -1):
                if messages[u].role == "user":
                    return _last_markable(messages, u)
            return None
    return None


def _flat(messages: tuple[Message, ...]) -> list[Position]:
    """Every block in prompt order, as the lookback counts them."""
    return [(n, m) for n, message in enumerate(messages) for m in range(len(message.content))]


def message_breakpoints(messages: tuple[Message, ...], slots: int = MAX_BREAKPOINTS - 1
                        ) -> list[Position]:
    """Positions in `messages` for at most `slots` breakpoints, in prompt order."""
    if not messages or slots <= 0:
        return []
    chosen: list[Position] = []
    for found in (_last_markable(messages, len(messages) - 1), _previous_end(messages),
                  _before_stripped_thinking(messages)):
        if found is not None and found not in chosen and len(chosen) < slots:
            chosen.append(found)
    if chosen and len(chosen) < slots:
        order = _flat(messages)
        index = {p: i for i, p in enumerate(order)}
        newest = index[chosen[0]]
        earlier = max((index[p] for p in chosen[1:]), default=-1)
        at = newest - LOOKBACK
        while len(chosen) < slots and at > earlier:
            n, m = order[at]
            if not isinstance(messages[n].content[m], THINKING_TYPES):
                chosen.append((n, m))
                at -= LOOKBACK
            else:
                at -= 1
    return sorted(chosen)


def marked_messages(messages: tuple[Message, ...], positions: list[Position],
                    ttl: str) -> list[Any]:
    """The messages for the request body: the Structs as they are, except those with a
    breakpoint, which become dicts with `cache_control` on the chosen blocks."""
    out: list[Any] = list(messages)
    cc = marker(ttl)
    for n, m in positions:
        message = out[n]
        if not isinstance(message, dict):
            message = out[n] = msgspec.to_builtins(message)
        message["content"][m]["cache_control"] = cc
    return out
