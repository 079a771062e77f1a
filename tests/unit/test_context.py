"""The context pipeline's layers on their own, thresholds, and the compaction circuit breaker."""

from __future__ import annotations

import pytest

from heddle.context.compactor import CompactResult
from heddle.context.pipeline import (CLEARED, CircuitBreaker, PipelineSettings, microcompact,
                                     prepare, rounds, snip, tokens_of)
from heddle.context.windows import Limits, estimate_tokens
from heddle.core.messages import (Message, ThinkingBlock, ToolResultBlock, ToolUseBlock,
                                  missing_tool_results, user_text)


def conversation(n_rounds: int, result_size: int = 1000) -> tuple[Message, ...]:
    msgs = [user_text("the task: fix the parser")]
    for i in range(n_rounds):
        msgs.append(Message("assistant", (ThinkingBlock(f"step {i}", "sig"),
                                          ToolUseBlock(f"t{i}", "Read", {"path": f"f{i}.py"}))))
        msgs.append(Message("user", (ToolResultBlock(f"t{i}", "x" * result_size),)))
    return tuple(msgs)


def valid(messages: tuple[Message, ...]) -> bool:
    roles = [m.role for m in messages]
    alternating = all(a != b for a, b in zip(roles, roles[1:])) and roles[0] == "user"
    uses = {b.id for m in messages for b in m.content if isinstance(b, ToolUseBlock)}
    results = {b.tool_use_id for m in messages for b in m.content if isinstance(b, ToolResultBlock)}
    return alternating and uses == results and not missing_tool_results(messages)


def test_thresholds_follow_the_window():
    limits = Limits(window=200_000, max_output=64_000)
    assert limits.effective == 180_000
    assert limits.auto_compact_at == 167_000
    assert limits.blocking_at == 177_000
    assert Limits(200_000, 8_192).effective == 191_808


def test_estimate_is_high():
    text = "word " * 1000
    assert estimate_tokens(text) >= len(text) / 4


def test_snip_drops_oldest_whole_rounds_and_keeps_the_task():
    msgs = conversation(50)
    snipped, removed = snip(msgs, max_messages=21)
    assert len(snipped) <= 21 and removed == len(msgs) - len(snipped)
    assert snipped[0].content[0].text == "the task: fix the parser"
    assert "Older messages were removed" in snipped[0].content[1].text
    again, _ = snip(snipped + msgs[-4:-2] + msgs[-2:], max_messages=21)
    assert sum("Older messages" in b.text for b in again[0].content if hasattr(b, "text")) == 1
    assert snipped[-1] == msgs[-1] and valid(snipped)
    assert snip(msgs, max_messages=1000) == (msgs, 0)


def test_microcompact_clears_oldest_results_to_target_and_never_thinking():
    msgs = conversation(10)
    tokens = tokens_of(msgs)
    out, cleared = microcompact(msgs, tokens, target=tokens - 1500, keep=2)
    assert cleared == 6  # each cleared result frees about 270 tokens
    contents = [b.content for m in out for b in m.content if isinstance(b, ToolResultBlock)]
    assert contents[:6] == [CLEARED] * 6 and contents[6:] == ["x" * 1000] * 4
    thinking = [b for m in out for b in m.content if isinstance(b, ThinkingBlock)]
    assert thinking == [b for m in msgs for b in m.content if isinstance(b, ThinkingBlock)]
    everything, n = microcompact(msgs, tokens, target=0, keep=2)
    assert n == 8  # the two most recent results are always kept
    assert valid(out) and valid(everything)


class Summaries:
    """A compactor seam for tests: summarises by counting, optionally failing."""

    def __init__(self, fail: bool = False):
        self.fail = fail
        self.calls = 0

    async def __call__(self, messages, model, reason):
        self.calls += 1
        if self.fail:
            raise RuntimeError("the summary model is down")
        summary = f"{len(messages)} messages about the parser"
        return CompactResult((user_text(summary),), summary, tokens_of(messages), 10)


async def test_prepare_runs_layers_lightest_first_and_reports_tokens():
    msgs = conversation(40, result_size=2000)
    limits = Limits(window=40_000, max_output=32_000)  # auto-compact at 7,000 tokens
    summaries = Summaries()
    out, tokens, events = await prepare(msgs, tokens_of(msgs), limits, "m", summaries,
                                        PipelineSettings(max_messages=61))
    assert [e.layer for e in events][:2] == ["snip", "microcompact"]
    assert all(e.tokens_after < e.tokens_before for e in events)
    assert tokens <= limits.auto_compact_at and valid(out)
    assert out[0].content[0].text == "the task: fix the parser"
    assert len(rounds(out)) >= PipelineSettings().keep_rounds


async def test_collapse_then_auto_keep_recent_rounds_verbatim():
    msgs = conversation(12, result_size=40)
    limits = Limits(window=26_000, max_output=20_000)  # auto-compact at -7,000: always over
    out, _, events = await prepare(msgs, tokens_of(msgs), limits, "m", Summaries(),
                                   PipelineSettings(keep_rounds=3))
    assert [e.layer for e in events] == ["collapse", "auto"]
    assert events[0].summary.endswith("messages about the parser")
    assert out[-6:] == msgs[-6:] and valid(out)


async def test_circuit_breaker_stops_after_three_failures():
    failing = Summaries(fail=True)
    breaker = CircuitBreaker(failing)
    msgs = conversation(12)
    limits = Limits(window=26_000, max_output=20_000)
    for _ in range(10):
        await prepare(msgs, tokens_of(msgs), limits, "m", breaker, PipelineSettings(keep_rounds=3))
    assert failing.calls == 3 and breaker.open
    with pytest.raises(RuntimeError, match="compaction is off"):
        await breaker(msgs, "m", "manual")
