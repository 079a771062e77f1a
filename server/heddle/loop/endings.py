"""How a model call's output becomes conversation when it ends badly: cancelled, failed, cut off.

Pure functions: they decide which blocks are kept and which synthetic tool results close the
conversation, so that the next request is always protocol-valid.
"""

from __future__ import annotations

from heddle.core.events import CoreEvent, MessageFinal, Tombstone
from heddle.core.messages import (THINKING_TYPES, Block, Message, TextBlock, ThinkingBlock,
                                  ToolUseBlock, append_user)
from heddle.loop.deps import ToolBatch

INTERRUPTED = "[The user interrupted the turn here.]"
CANCELLED_RESULT = ("The user cancelled the turn before this tool call finished; "
                    "its effect is unknown.")
MODEL_FAILED = "the model's response failed"


def sanitize(blocks: list[Block]) -> tuple[Block, ...]:
    """Make a partial assistant message valid: no empty text, no unsigned or trailing thinking."""
    kept = [b for b in blocks
            if not (isinstance(b, TextBlock) and not b.text.strip())
            and not (isinstance(b, ThinkingBlock) and not b.signature)]
    while kept and isinstance(kept[-1], THINKING_TYPES):
        kept.pop()
    return tuple(kept)


def assistant_message(blocks: list[Block]) -> Message:
    return Message("assistant", sanitize(blocks) or (TextBlock("(no answer)"),))


def assistant_text_only(blocks: list[Block]) -> Message | None:
    """A cut-off response without its tool calls (they were discarded), or None if empty."""
    kept = sanitize([b for b in blocks if not isinstance(b, ToolUseBlock)])
    return Message("assistant", kept) if kept else None


def tombstone(index: int, reason: str) -> Tombstone:
    return Tombstone(index, reason)


def aborted(messages: tuple[Message, ...], blocks: list[Block], batch: ToolBatch,
            abort_reason: str | None) -> tuple[list[CoreEvent], tuple[Message, ...], str]:
    """Close the conversation after a cancel while the model streamed: keep what it wrote. A
    new prompt interrupting (`abort_reason == "interrupt"`) adds no interruption note: the new
    message carries the context."""
    events = batch.discard("cancelled")
    content = sanitize(blocks)
    if content:
        assistant = Message("assistant", content)
        messages += (assistant,)
        events.append(MessageFinal(assistant))
    return _closed(events, messages, content, batch, abort_reason)


def aborted_tools(messages: tuple[Message, ...], batch: ToolBatch,
                  abort_reason: str | None) -> tuple[list[CoreEvent], tuple[Message, ...], str]:
    """Close the conversation after a cancel while tools ran: the response is already the last
    message (and final), so only the results and the note are added."""
    return _closed(batch.discard("cancelled"), messages, messages[-1].content, batch,
                   abort_reason)


def _closed(events: list[CoreEvent], messages: tuple[Message, ...], content: tuple[Block, ...],
            batch: ToolBatch, abort_reason: str | None
            ) -> tuple[list[CoreEvent], tuple[Message, ...], str]:
    known = {b.id for b in content if isinstance(b, ToolUseBlock)}
    tail: tuple[Block, ...] = tuple(r for r in batch.results(CANCELLED_RESULT)
                                    if r.tool_use_id in known)
    if abort_reason != "interrupt":
        tail += (TextBlock(INTERRUPTED),)
    if tail:
        messages = append_user(messages, tail)
        events.append(MessageFinal(Message("user", tail)))
    text = "".join(b.text for b in content if isinstance(b, TextBlock))
    return events, messages, text


def close_failed(messages: tuple[Message, ...], blocks: list[Block],
                 batch: ToolBatch) -> tuple[list[CoreEvent], tuple[Message, ...]]:
    """Keep what a failed response showed (its text up to where it broke off too), with a
    result for each tool call: the finished ones' own, the others' saying they did not run or
    were discarded, as the editor is told."""
    events = batch.discard(MODEL_FAILED, running=True)
    content = sanitize(blocks)
    if content:
        assistant = Message("assistant", content)
        messages += (assistant,)
        events.append(MessageFinal(assistant))
        results = batch.results(CANCELLED_RESULT)  # every call has its result by now
        if results:
            messages = append_user(messages, results)
            events.append(MessageFinal(Message("user", results)))
    return events, messages
