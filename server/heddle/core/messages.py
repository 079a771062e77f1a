"""Conversation messages in the Messages API's own shape, as frozen values.

`to_api` turns them into the JSON the model endpoint takes; the transcript stores the same form.
"""

from __future__ import annotations

import re
from typing import Any, Literal, Union

import msgspec


class TextBlock(msgspec.Struct, frozen=True, tag_field="type", tag="text"):
    text: str


class ThinkingBlock(msgspec.Struct, frozen=True, tag_field="type", tag="thinking"):
    thinking: str
    signature: str


class RedactedThinkingBlock(msgspec.Struct, frozen=True, tag_field="type", tag="redacted_thinking"):
    data: str


class ToolUseBlock(msgspec.Struct, frozen=True, tag_field="type", tag="tool_use"):
    id: str
    name: str
    input: dict[str, Any]


class ImageSource(msgspec.Struct, frozen=True, tag_field="type", tag="base64"):
    media_type: str
    data: str
    """Base64."""


class ImageBlock(msgspec.Struct, frozen=True, tag_field="type", tag="image"):
    source: ImageSource


ResultPart = Union[TextBlock, ImageBlock]


class ToolResultBlock(msgspec.Struct, frozen=True, tag_field="type", tag="tool_result"):
    tool_use_id: str
    content: str | tuple[ResultPart, ...]
    """Text; or text and images (an MCP tool's result), the text first."""
    is_error: bool = False

    @property
    def text(self) -> str:
        """The result's text (its images left out)."""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p.text for p in self.content if isinstance(p, TextBlock))


Block = Union[TextBlock, ThinkingBlock, RedactedThinkingBlock, ToolUseBlock, ToolResultBlock]
THINKING_TYPES = (ThinkingBlock, RedactedThinkingBlock)


class Message(msgspec.Struct, frozen=True):
    role: Literal["user", "assistant"]
    content: tuple[Block, ...]


_SURROGATE = re.compile("[\ud800-\udfff]")


def well_formed(text: str) -> str:
    """`text` with every lone surrogate as U+FFFD, so that it can be encoded as UTF-8: sent to
    the editor and the model, recorded, counted. The filesystem gives a name that is not UTF-8
    with its bytes as surrogates (`\\udcff`); nothing else that reaches a tool's result does
    (JSON decoders refuse them)."""
    return text if text.isascii() else _SURROGATE.sub("\ufffd", text)


def user_text(text: str) -> Message:
    return Message("user", (TextBlock(text),))


def tool_uses(message: Message) -> list[ToolUseBlock]:
    return [b for b in message.content if isinstance(b, ToolUseBlock)]


def text_of(message: Message) -> str:
    return "".join(b.text for b in message.content if isinstance(b, TextBlock))


def append_user(messages: tuple[Message, ...], content: tuple[Block, ...]) -> tuple[Message, ...]:
    """Add user content, merging into a trailing user message so roles keep alternating."""
    if messages and messages[-1].role == "user":
        last = messages[-1]
        return messages[:-1] + (Message("user", last.content + content),)
    return messages + (Message("user", content),)


def to_api(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    return msgspec.to_builtins(messages)


def missing_tool_results(messages: tuple[Message, ...]) -> list[ToolUseBlock]:
    """tool_use blocks of the last assistant message that no following user message answers."""
    if not messages:
        return []
    last_assistant = next((i for i in range(len(messages) - 1, -1, -1)
                           if messages[i].role == "assistant"), None)
    if last_assistant is None:
        return []
    answered = {b.tool_use_id for m in messages[last_assistant + 1:] for b in m.content
                if isinstance(b, ToolResultBlock)}
    return [b for b in tool_uses(messages[last_assistant]) if b.id not in answered]


def strip_thinking(messages: tuple[Message, ...]) -> tuple[Message, ...]:
    """Remove thinking blocks (their signatures bind them to the model that wrote them)."""
    out = []
    for m in messages:
        if m.role == "assistant" and any(isinstance(b, THINKING_TYPES) for b in m.content):
            kept = tuple(b for b in m.content if not isinstance(b, THINKING_TYPES))
            m = Message("assistant", kept or (TextBlock("[thinking omitted]"),))
        out.append(m)
    return tuple(out)
