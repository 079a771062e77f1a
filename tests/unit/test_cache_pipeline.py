"""The context pipeline as the prompt cache needs it: old content changes rarely and in
batches, early when the cache has expired anyway, and server-side clearing in steps."""

from __future__ import annotations

from heddle.context.pipeline import (PipelineSettings, prepare, sent_tokens, server_clearing,
                                     tokens_of)
from heddle.context.windows import Limits
from heddle.core.messages import Message, ToolResultBlock, ToolUseBlock, user_text
from heddle.sessions.turns import cache_expired

LIMITS = Limits(window=60_000, max_output=32_000)  # auto-compact at 27,000 estimated tokens
TRIGGER, GOAL = int(27_000 * 0.75), int(27_000 * 0.5)


def conversation(rounds: int, size: int = 3500) -> tuple[Message, ...]:
    msgs = [user_text("read the files")]
    for i in range(rounds):
        msgs.append(Message("assistant", (ToolUseBlock(f"t{i}", "Read", {"path": f"f{i}"}),)))
        msgs.append(Message("user", (ToolResultBlock(f"t{i}", "x" * size),)))
    return tuple(msgs)


async def test_microcompact_clears_down_to_the_goal_in_one_batch():
    msgs = conversation(21)  # about 21,000 tokens: just over the trigger
    assert tokens_of(msgs) > TRIGGER
    out, tokens, events = await prepare(msgs, tokens_of(msgs), LIMITS, "m", None)
    assert [e.layer for e in events] == ["microcompact"]
    assert tokens <= GOAL < TRIGGER - 5000  # far under the trigger: the next calls grow freely
    grown = out + conversation(2)[1:]
    again, _, later = await prepare(grown, tokens_of(grown), LIMITS, "m", None)
    assert later == [] and again == grown  # the next call sends the same prefix, grown


async def test_a_cold_cache_lets_snip_and_microcompact_cut_to_their_goals_now():
    msgs = conversation(17)  # between the goal and the trigger
    assert GOAL < tokens_of(msgs) < TRIGGER
    _, _, warm = await prepare(msgs, tokens_of(msgs), LIMITS, "m", None)
    assert warm == []
    _, tokens, cold = await prepare(msgs, tokens_of(msgs), LIMITS, "m", None, cold=True)
    assert [e.layer for e in cold] == ["microcompact"] and tokens <= GOAL
    many = conversation(170, size=10)  # 341 messages: under 400, over the goal of 300
    _, _, warm = await prepare(many, tokens_of(many), LIMITS, "m", None)
    assert warm == []
    out, _, cold = await prepare(many, tokens_of(many), LIMITS, "m", None, cold=True)
    assert [e.layer for e in cold] == ["snip"] and len(out) <= 300


def test_server_clearing_moves_in_a_few_steps_and_never_back():
    settings = PipelineSettings(server_edits=True)
    counts = [server_clearing(conversation(n), LIMITS, settings) for n in range(1, 120)]
    assert counts[:15] == [0] * 15  # under the trigger: nothing is cleared
    assert counts == sorted(counts)  # what was cleared stays cleared
    assert len(set(counts)) <= 120 * 3500 // 3.5 // (TRIGGER - GOAL) + 2  # one step a batch
    assert all(counts[n] <= max(0, n + 1 - settings.keep_tool_results) for n in range(len(counts)))
    for n in (30, 60, 119):  # what the model sees stays between the goal and the trigger
        assert GOAL - 1100 <= sent_tokens(conversation(n), LIMITS, settings) <= TRIGGER
    assert server_clearing(conversation(60), LIMITS, PipelineSettings()) == 0


def test_the_cache_of_a_session_expired_after_its_lifetime():
    assert not cache_expired(None, 1000.0, "5m")
    assert not cache_expired(100.0, 400.0, "5m") and cache_expired(100.0, 400.1, "5m")
    assert not cache_expired(100.0, 3000.0, "1h") and cache_expired(100.0, 3701.0, "1h")
