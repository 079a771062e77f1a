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
class Ending:
    """How a server's connection ended: `how` in one line (`exited with code 3`), and the last
    lines its stderr had written (secrets already masked; empty for an HTTP server)."""

    how: str
    stderr: tuple[str, ...] = ()

    def line(self) -> str:
        """One line for a tool result or a status: how, and its last three lines of output."""
        last = " | ".join(self.stderr[-3:])
        return self.how + (f"; its last output: {last}" if last else "")


@dataclass(frozen=True)
class CallResult:
    """A tool call's result, converted: the text the model reads, the images beside it."""

    text: str
    images: tuple[tuple[str, str], ...] = ()
    """(media type, base64 data) of each image the result holds."""
    is_error: bool = False
