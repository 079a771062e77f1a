"""The values the loop's steps hand each other: what a query runs with (`Query`), what a model
call produced (`Call`), and how each step ends (`Onward`, `Again`, `Stop`).

A step is an async generator: it yields core events, and last one outcome. `Onward` carries on
with the next step of the iteration, `Again` goes round with a new state (its `transition` says
why), `Stop` ends the query with a Terminal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from heddle.context.windows import Limits
from heddle.core.events import ErrorInfo, TerminalReason, Usage
from heddle.core.messages import Block, Message, TextBlock
from heddle.loop.deps import LoopDeps, ToolBatch
from heddle.loop.params import LoopConfig, LoopRuntime
from heddle.loop.state import LoopState
from heddle.loop.summaries import Background


@dataclass(frozen=True)
class Query:
    """One call of `query()`: its configuration, seams and runtime, and what is worked out
    from them once at entry."""

    config: LoopConfig
    deps: LoopDeps
    run: LoopRuntime
    limits: Limits
    """Of the configured model: for the context pipeline and the meter."""
    tool_schemas: tuple[dict, ...]
    background: Background
    limits_of: Callable[[str], Limits]
    """Of any model: the output limit of the one a call goes to."""

    def output_cap(self, model: str) -> int:
        """The highest `max_tokens` a call to `model` may ask for."""
        return self.limits_of(model).max_output


class Response:
    """What one streamed model response has produced so far."""

    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self.partial_text: list[str] = []
        self.stop_reason: str | None = None
        self.usage = Usage()

    def with_partial(self) -> list[Block]:
        text = "".join(self.partial_text)
        return self.blocks + ([TextBlock(text)] if text else [])


@dataclass(frozen=True)
class Call:
    """A model call of this iteration, as it ended."""

    status: str
    """`ok`, `aborted` (cancelled while streaming) or `failed`."""
    response: Response
    batch: ToolBatch
    error: ErrorInfo | None = None


@dataclass(frozen=True)
class Onward:
    """Carry on with the next step of this iteration."""

    state: LoopState
    call: Call | None = None
    """The iteration's model call, once it was made."""


@dataclass(frozen=True)
class Again:
    """Go round again with `state`."""

    state: LoopState


@dataclass(frozen=True)
class Stop:
    """End the query: the Terminal's facts (its usage is `state.usage`)."""

    state: LoopState
    reason: TerminalReason
    messages: tuple[Message, ...]
    text: str = ""
    error: ErrorInfo | None = None


Outcome = Onward | Again | Stop
OUTCOMES = (Onward, Again, Stop)
