"""Reading what the daemon sent the model, apart from where its cache breakpoints happen to be."""

from __future__ import annotations

from typing import Any


def messages_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A request's messages without `cache_control` markers: the rolling breakpoint sits on the
    newest blocks of each call, so the same conversation is marked differently call by call."""
    return [{**m, "content": [{k: v for k, v in b.items() if k != "cache_control"}
                              for b in m["content"]]} if isinstance(m["content"], list) else m
            for m in body["messages"]]
