"""The model seam: what the loop asks of a model and what comes back while it streams."""

from __future__ import annotations

from typing import Any, AsyncIterator, Protocol, Union

import msgspec

from heddle.core.events import ErrorInfo, Retry, Usage
from heddle.core.messages import Block, Message


EFFORTS = ("low", "medium", "high", "xhigh", "max")
"""The Messages API's `output_config.effort` levels, lowest first."""


class ThinkingSupport(msgspec.Struct, frozen=True):
    """How a model thinks, in the forms the Messages API takes for it."""

    adaptive: bool = False
    """It takes `{"type": "adaptive"}` (the model decides how much to think)."""
    budget: bool = False
    """It takes `{"type": "enabled", "budget_tokens": N}`."""
    efforts: tuple[str, ...] = ()
    """The `output_config.effort` levels it takes, lowest first; empty: none."""
    hides_thinking: bool = False
    """Its thinking comes back empty (only signed) unless `display: "summarized"` is asked
    for."""


class AdaptiveThinking(msgspec.Struct, frozen=True, tag_field="type", tag="adaptive",
                       omit_defaults=True):
    """The model decides when and how much to think."""

    display: str | None = None
    """`summarized`: its thinking is sent, summarised, where the model would send none by
    default; None: the model's default."""


class BudgetThinking(msgspec.Struct, frozen=True, tag_field="type", tag="enabled"):
    """Thinking of at most `budget_tokens` (at least 1024, below the call's `max_tokens`)."""

    budget_tokens: int


Thinking = Union[AdaptiveThinking, BudgetThinking]


class ModelRequest(msgspec.Struct, frozen=True):
    model: str
    system: str
    messages: tuple[Message, ...]
    tools: tuple[dict[str, Any], ...] = ()
    max_tokens: int = 8192
    thinking: Thinking | None = None
    """The request's `thinking`; None: none is sent (the model's default: off, for every
    model Heddle's table knows)."""
    effort: str | None = None
    """`output_config.effort`; None: none is sent (the model's default)."""
    cache_ttl: str | None = None
    """Prompt caching: `5m` or `1h` breakpoints (`heddle.model.caching` places them); None:
    no `cache_control` at all (for endpoints that reject it)."""
    clear_tool_uses: int = 0
    """Server-side context editing: the endpoint clears the results of this many of the oldest
    tool uses (`clear_tool_uses_20250919`); 0: no `context_management` is sent."""


class BlockStarted(msgspec.Struct, frozen=True):
    index: int
    kind: str
    """`text`, `thinking`, `redacted_thinking` or `tool_use`."""
    tool_use_id: str | None = None
    tool_name: str | None = None


class TextChunk(msgspec.Struct, frozen=True):
    index: int
    text: str


class ThinkingChunk(msgspec.Struct, frozen=True):
    index: int
    text: str


class BlockDone(msgspec.Struct, frozen=True):
    index: int
    block: Block
    input_error: str | None = None
    """For tool_use: the streamed input was not valid JSON (the block's input is then {})."""


class StreamEnd(msgspec.Struct, frozen=True):
    stop_reason: str | None
    usage: Usage
    cleared_input_tokens: int = 0
    """Input tokens the endpoint's context editing cleared from this request (its
    `context_management.applied_edits`); 0 without any."""


class Billed(msgspec.Struct, frozen=True):
    """The tokens the call has been billed so far (its response's `message_start`, plus the
    attempts that failed before it): what counts if the call is cancelled before `StreamEnd`,
    whose usage then replaces it."""

    usage: Usage


class Restart(msgspec.Struct, frozen=True):
    """Everything this call streamed so far is void: the response broke off and the request is
    being made again (a `Retry` follows, then the new response from its start)."""

    error: ErrorInfo


StreamEvent = Union[BlockStarted, TextChunk, ThinkingChunk, BlockDone, Billed, Restart, Retry,
                    StreamEnd]


class ModelError(Exception):
    """A model call failed for good (after retries). `partial` holds the blocks completed;
    `usage` the tokens its requests reported (billed although the call failed)."""

    def __init__(self, info: ErrorInfo, partial: tuple[Block, ...] = (), usage: Usage = Usage()):
        super().__init__(info.message)
        self.info = info
        self.partial = partial
        self.usage = usage


class ModelCaller(Protocol):
    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Stream one model response. Raises ModelError; ends with exactly one StreamEnd, whose
        usage counts every request the call made (those that broke off too); after a
        `Restart`, what came before it is to be forgotten."""
        ...
