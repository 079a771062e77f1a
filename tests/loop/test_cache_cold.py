"""A cold prompt cache: the first call of the query may cut old content for free, and only the
first (later calls read what it wrote)."""

from __future__ import annotations

from heddle.context.windows import Limits
from heddle.core.events import Compaction, TerminalReason, Usage
from heddle.core.messages import Message, ToolResultBlock, ToolUseBlock, user_text
from heddle.core.stream import BlockDone, BlockStarted, StreamEnd

from loop.fakes import ScriptedModel, run_query, text

LIMITS = Limits(window=60_000, max_output=32_000)  # auto-compact at 27,000 estimated tokens
GOAL = 13_500  # microcompact's goal; its trigger is 20,250


def history(rounds: int) -> tuple[Message, ...]:
    msgs = [user_text("read the files")]
    for i in range(rounds):
        msgs.append(Message("assistant", (ToolUseBlock(f"old{i}", "Read", {"path": "f"}),)))
        msgs.append(Message("user", (ToolResultBlock(f"old{i}", "x" * 3500),)))
    return tuple(msgs) + (Message("assistant", (ToolUseBlock("t0", "LS", {}),)),
                          Message("user", (ToolResultBlock("t0", "ok"),)))


def ls(call_id: str) -> list:
    block = ToolUseBlock(call_id, "LS", {})
    # reported as over the goal (and under the trigger): a cold cut on every call would clear
    return [BlockStarted(0, "tool_use", call_id, "LS"), BlockDone(0, block),
            StreamEnd("tool_use", Usage(input_tokens=GOAL + 500))]


async def test_only_the_first_call_of_a_cold_query_cuts_to_the_goal(tmp_path):
    model = ScriptedModel(ls("a"), ls("b"), ls("c"), text("Done."))
    run = await run_query(tmp_path, model, history(17), limits=LIMITS, cache_cold=True)
    assert run.terminal.reason is TerminalReason.COMPLETED
    assert [e.layer for e in run.of(Compaction)] == ["microcompact"]
    warm = await run_query(tmp_path, ScriptedModel(ls("a"), text("Done.")), history(17),
                           limits=LIMITS)
    assert warm.of(Compaction) == []  # under the trigger, a warm cache is left alone
