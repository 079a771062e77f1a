"""What a server answers, as plain values (the SDK's types stay in `heddle.mcp.client`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CONNECT_TIMEOUT = 30.0
"""Seconds a server has to start and answer `initialize` and `tools/list`."""


@dataclass(frozen=True)
class RemoteTool:
    """A tool as a server listed it (SDK types already turned into plain values)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    read_only_hint: bool = False
    title: str | None = None


@dataclass(frozen=True)
class CallResult:
    """A tool call's result, converted: the text the model reads, the images beside it."""

    text: str
    images: tuple[tuple[str, str], ...] = ()
    """(media type, base64 data) of each image the result holds."""
    is_error: bool = False
