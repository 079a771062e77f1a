"""The context pipeline that runs before every model call, lightest layer first.

    layer 1  snip          drop the oldest rounds past a message cap (keeps the first prompt)
    layer 2  microcompact  clear old tool results by tool_use_id (thinking is never touched)
    layer 3  collapse      summarise the older half of the rounds, keep the rest verbatim
    layer 4  auto          summarise everything but the most recent rounds

Each layer runs only while the conversation is still over its trigger, reports the tokens it
freed, and feeds the next. (Layer 0, the per-result budget, is applied as each tool result is
made.)

Snip and microcompact are cache-aware: what they change is old content, so the next call
re-writes the prompt cache from there on. They act rarely and in batches — once over the
trigger they cut well below it (`snip_goal_ratio`, `microcompact_goal_ratio`), and the calls in
between send an unchanged, growing prefix — and early when the cache has expired anyway
(`cold`: the session was idle longer than the cache lifetime), when a cut costs nothing more.
With `server_edits`, old tool results are cleared by the endpoint's context editing instead
(`server_clearing` says how many, in the same batches) and the history here stays whole. A round is an assistant message and the user message that answers it, so cutting at
round boundaries never separates a tool_use from its result or splits a message's thinking.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from heddle.context.compactor import Compactor
from heddle.context.windows import Limits, estimate_tokens
from heddle.core.events import Compaction
from heddle.core.messages import (Message, TextBlock, ToolResultBlock, ToolUseBlock,
                                  append_user, to_api, user_text)

log = logging.getLogger(__name__)

CLEARED = "[Old tool result cleared to save context. Run the tool again if you need it.]"
SNIPPED = "[Older messages were removed here to save context.]"
COLLAPSED = "[Summary of earlier work in this session]\n{summary}"
CONTINUATION = ("This session continues an earlier conversation that was summarised to save "
                "space. The summary:\n\n{summary}")
MAX_CONSECUTIVE_FAILURES = 3


@dataclass(frozen=True)
class PipelineSettings:
    max_messages: int = 400
    """Snip above this many messages."""
    snip_goal_ratio: float = 0.75
    """...down to this share of `max_messages`, so that snip runs once per many rounds."""
    keep_tool_results: int = 2
    """Microcompact never clears this many most recent tool results."""
    keep_rounds: int = 4
    """Collapse and auto-compact keep this many most recent rounds verbatim."""
    microcompact_ratio: float = 0.75
    """Microcompact once the conversation passes this share of the auto-compact threshold."""
    microcompact_goal_ratio: float = 0.5
    """...and then clear down to this share of it in one batch: each clearing costs a cache
    re-write from the first result it clears, so it should happen rarely, not every call."""
    server_edits: bool = False
    """Clear old tool results through the endpoint's context editing (`clear_tool_uses`), not
    in the history here; for endpoints that support it."""
    compact_goal_ratio: float = 0.6
    """Once over the threshold, summarise until under this share of it, so that compaction
    does not run again a few calls later."""


def tokens_of(messages: tuple[Message, ...]) -> int:
    return estimate_tokens(to_api(messages))


def rounds(messages: tuple[Message, ...]) -> list[int]:
    """Indexes where rounds start (each assistant message after the first prompt)."""
    return [i for i, m in enumerate(messages) if i > 0 and m.role == "assistant"]


def cut(messages: tuple[Message, ...], start: int, end: int, note: str) -> tuple[Message, ...]:
    """Replace messages[start:end] (whole rounds) with a note merged into the user message
    before them (once: a note that is already there is not added again)."""
    head = messages[:start]
    if not any(isinstance(b, TextBlock) and b.text == note for b in head[-1].content):
        head = append_user(head, (TextBlock(note),))
    return head + messages[end:]


def snip(messages: tuple[Message, ...], max_messages: int) -> tuple[tuple[Message, ...], int]:
    """Drop the oldest whole rounds until at most `max_messages` remain; returns how many went."""
    if len(messages) <= max_messages:
        return messages, 0
    starts = rounds(messages)
    excess = len(messages) - max_messages
    end = next((s for s in starts if s - 1 >= excess), None)
    if end is None or end <= 1:
        return messages, 0
    return cut(messages, 1, end, SNIPPED), end - 1


def microcompact(messages: tuple[Message, ...], tokens: int, target: int, keep: int
                 ) -> tuple[tuple[Message, ...], int]:
    """Clear tool results, oldest first, until the estimate is at most `target`; the `keep` most
    recent results are never cleared. Returns the messages and how many were cleared."""
    found = [(i, j, b) for i, m in enumerate(messages) if m.role == "user"
             for j, b in enumerate(m.content)
             if isinstance(b, ToolResultBlock) and b.content != CLEARED]
    clearable = found[:max(0, len(found) - keep)]
    out = list(messages)
    cleared = 0
    for i, j, b in clearable:
        if tokens <= target:
            break
        if isinstance(b.content, str) and len(b.content) <= len(CLEARED):
            continue  # (a result with images is always worth clearing)
        blocks = list(out[i].content)
        blocks[j] = ToolResultBlock(b.tool_use_id, CLEARED, b.is_error)
        out[i] = Message("user", tuple(blocks))
        tokens -= estimate_tokens(b.content) - estimate_tokens(CLEARED)
        cleared += 1
    return (tuple(out), cleared) if cleared else (messages, 0)


class CircuitBreaker:
    """Stops model compaction after MAX_CONSECUTIVE_FAILURES failures in a row (per session), so
    a session stuck over the limit cannot burn model calls on compaction that keeps failing."""

    def __init__(self, compactor: Compactor):
        self.compactor = compactor
        self.failures = 0

    @property
    def open(self) -> bool:
        return self.failures >= MAX_CONSECUTIVE_FAILURES

    async def __call__(self, messages, model, reason):
        if self.open:
            raise RuntimeError(f"compaction is off for this session after {self.failures} "
                               "failures in a row")
        try:
            result = await self.compactor(messages, model, reason)
        except Exception:
            self.failures += 1
            raise
        self.failures = 0
        return result


async def prepare(messages: tuple[Message, ...], tokens: int, limits: Limits, model: str,
                  compactor: Compactor | None, settings: PipelineSettings = PipelineSettings(),
                  microcompactor=None, cold: bool = False
                  ) -> tuple[tuple[Message, ...], int, list[Compaction]]:
    """Run the layers; returns the messages to send, their estimated tokens, and one event per
    layer that changed something. `cold`: nothing of the prompt is cached any more, so snip and
    microcompact cut down to their goals already from there."""
    events: list[Compaction] = []

    def record(layer: str, before: int, new: tuple[Message, ...], summary: str = "") -> int:
        after = sent_tokens(new, limits, settings)
        events.append(Compaction(layer, before, after, summary, new))
        return after

    snip_to = int(settings.max_messages * settings.snip_goal_ratio)
    if len(messages) > (snip_to if cold else settings.max_messages):
        snipped, removed = snip(messages, snip_to)
        if removed:
            messages, tokens = snipped, record("snip", tokens, snipped)
    target, goal = _clearing_bounds(limits, settings)
    if tokens > (goal if cold else target) and not settings.server_edits:
        cleared_messages, cleared = (microcompactor or microcompact)(
            messages, tokens, goal, settings.keep_tool_results)
        if cleared:
            messages, tokens = cleared_messages, record("microcompact", tokens, cleared_messages)
    if tokens > limits.auto_compact_at and compactor is not None:
        goal = int(limits.auto_compact_at * settings.compact_goal_ratio)
        for layer in ("collapse", "auto"):
            result = await _summarise(messages, model, compactor, layer, settings.keep_rounds)
            if result is not None:
                new, summary = result
                messages, tokens = new, record(layer, tokens, new, summary)
            if tokens <= goal:
                break
    return messages, tokens, events


def _clearing_bounds(limits: Limits, settings: PipelineSettings) -> tuple[int, int]:
    """(trigger, goal) of clearing old tool results, in tokens."""
    return (int(limits.auto_compact_at * settings.microcompact_ratio),
            int(limits.auto_compact_at * settings.microcompact_goal_ratio))


SERVER_PLACEHOLDER_TOKENS = 12
"""About what the endpoint's placeholder for a cleared result costs."""


def server_clearing(messages: tuple[Message, ...], limits: Limits,
                    settings: PipelineSettings) -> int:
    """With `server_edits`: how many of the oldest tool uses the endpoint should clear.

    A pure function of the (whole) history, so that it is the same for every call until the
    history has grown by another batch: the conversation as sent grows between the goal and
    the trigger, and each step clears about `trigger - goal` tokens at once. The most recent
    `keep_tool_results` are never cleared."""
    return _server_plan(messages, limits, settings)[0]


def sent_tokens(messages: tuple[Message, ...], limits: Limits,
                settings: PipelineSettings) -> int:
    """The estimate of what the model sees: with `server_edits`, less what the endpoint
    clears."""
    return tokens_of(messages) - _server_plan(messages, limits, settings)[1]


def _server_plan(messages: tuple[Message, ...], limits: Limits,
                 settings: PipelineSettings) -> tuple[int, int]:
    """(tool uses to clear, tokens that frees)."""
    if not settings.server_edits:
        return 0, 0
    target, goal = _clearing_bounds(limits, settings)
    size = tokens_of(messages)
    if size <= target:
        return 0, 0
    step = max(1, target - goal)
    wanted = (size - goal) // step * step
    sizes = {b.tool_use_id: estimate_tokens(b.content) for m in messages if m.role == "user"
             for b in m.content if isinstance(b, ToolResultBlock)}
    uses = [b.id for m in messages if m.role == "assistant" for b in m.content
            if isinstance(b, ToolUseBlock)]
    freed = count = 0
    for use in uses[:max(0, len(uses) - settings.keep_tool_results)]:
        if freed >= wanted:
            break
        freed += max(0, sizes.get(use, 0) - SERVER_PLACEHOLDER_TOKENS)
        count += 1
    return count, freed


async def _summarise(messages: tuple[Message, ...], model: str, compactor: Compactor,
                     layer: str, keep_rounds: int) -> tuple[tuple[Message, ...], str] | None:
    starts = rounds(messages)
    if len(starts) <= keep_rounds:
        return None
    keep_from = starts[-keep_rounds] if keep_rounds else len(messages)
    end = keep_from if layer == "auto" else starts[max(1, (len(starts) - keep_rounds) // 2)]
    if end <= 1:
        return None
    segment = messages[:end]
    try:
        result = await compactor(segment, model, layer)
    except Exception as exc:  # the next layer (or the blocking limit) takes over
        log.warning("%s compaction failed: %s", layer, exc)
        return None
    if layer == "auto":
        return (user_text(CONTINUATION.format(summary=result.summary)),) + messages[end:], \
            result.summary
    return cut(messages, 1, end, COLLAPSED.format(summary=result.summary)), result.summary


async def compact_now(messages: tuple[Message, ...], model: str, compactor: Compactor,
                      keep_rounds: int) -> tuple[tuple[Message, ...], str] | None:
    """A compaction the user asked for: summarise all but the last rounds (all, if there are
    no more than that). None when there is nothing to summarise or it failed."""
    if not rounds(messages):
        return None
    result = await _summarise(messages, model, compactor, "auto", keep_rounds)
    return result or await _summarise(messages, model, compactor, "auto", 0)


async def collapse_drain(messages: tuple[Message, ...], model: str, compactor: Compactor,
                         keep_rounds: int) -> tuple[tuple[Message, ...], Compaction] | None:
    """After a prompt-too-long error: collapse the older rounds (finer than a full compaction).
    None when there are too few rounds or it failed; then a reactive compaction follows."""
    result = await _summarise(messages, model, compactor, "collapse", keep_rounds)
    if result is None:
        return None
    new, summary = result
    return new, Compaction("collapse", tokens_of(messages), tokens_of(new), summary, new)
