"""The recovery ladder, in-process: `query()` with fake seams (a scripted model, a summariser),
no daemon and no HTTP. The daemon-level tests of the same ladders are in tests/e2e/test_loop.py.
"""

from __future__ import annotations

from heddle.core.events import (Compaction, ModelFallback, TerminalReason, Tombstone,
                                ToolCallFinished)
from heddle.core.messages import TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from heddle.loop.ladder import OUTPUT_LIMIT_NUDGE

from loop.fakes import ScriptedModel, Summariser, failure, first_prompt, run_query, text, tool

TOO_LONG = failure("promptTooLong", "prompt is too long: 300000 tokens > 200000 maximum")


async def test_a_prompt_too_long_is_collapsed_then_compacted_then_fails(tmp_path):
    model, summariser = ScriptedModel(TOO_LONG), Summariser()
    run = await run_query(tmp_path, model, first_prompt(rounds=6), compactor=summariser)
    assert run.terminal.reason is TerminalReason.PROMPT_TOO_LONG
    assert run.terminal.error.code == "promptTooLong"
    assert run.terminal.transitions == ("collapse_drain_retry", "reactive_compact_retry")
    assert summariser.reasons == ["collapse", "reactive"]  # each rung once
    assert [c.layer for c in run.of(Compaction)] == ["collapse", "reactive"]
    sizes = [len(r.messages) for r in model.requests]
    assert len(sizes) == 3 and sizes[0] > sizes[1] > sizes[2] == 1


async def test_without_older_rounds_the_ladder_starts_at_compaction(tmp_path):
    model, summariser = ScriptedModel(TOO_LONG, text("Done.")), Summariser()
    run = await run_query(tmp_path, model, compactor=summariser)
    assert run.terminal.reason is TerminalReason.COMPLETED and run.terminal.text == "Done."
    assert run.terminal.transitions == ("reactive_compact_retry",)
    assert summariser.reasons == ["reactive"]
    assert run.terminal.error is None  # a recovered error is never reported


async def test_a_failing_compactor_or_none_leaves_the_original_error(tmp_path):
    for seams in ({"compactor": Summariser(fail=True)}, {}):
        run = await run_query(tmp_path, ScriptedModel(TOO_LONG), **seams)
        assert run.terminal.reason is TerminalReason.PROMPT_TOO_LONG
        assert run.terminal.error.message.startswith("prompt is too long")
        assert run.terminal.transitions == ()


async def test_a_cut_off_answer_is_raised_once_then_nudged_three_times(tmp_path):
    model = ScriptedModel(text("partial", stop="max_tokens"))
    run = await run_query(tmp_path, model)
    assert run.terminal.transitions == ("max_output_tokens_escalate",
                                        *["max_output_tokens_recovery"] * 3)
    # "main-model" is not in the table: its maximum output is the unknown model's 32,000
    assert [r.max_tokens for r in model.requests] == [8192, 32000, 32000, 32000, 32000]
    assert run.of(Tombstone) == [Tombstone(0, "the output limit was raised and the answer is "
                                              "being written again")]
    assert model.requests[2].messages[-1].content[-1] == TextBlock(OUTPUT_LIMIT_NUDGE)
    assert run.terminal.reason is TerminalReason.COMPLETED
    assert run.terminal.error.code == "maxOutputTokens" and run.terminal.text == "partial"


async def test_a_higher_output_limit_can_be_enough(tmp_path):
    model = ScriptedModel(text("cut", stop="max_tokens"), text("The whole answer."))
    run = await run_query(tmp_path, model)
    assert (run.terminal.reason, run.terminal.text) == (TerminalReason.COMPLETED,
                                                        "The whole answer.")
    assert run.terminal.transitions == ("max_output_tokens_escalate",)
    assert run.terminal.messages[-1].content == (TextBlock("The whole answer."),)


async def test_an_overloaded_model_falls_back_once_without_its_thinking(tmp_path):
    model = ScriptedModel(failure("overloaded", before=text("half")[:2]), failure("overloaded"))
    run = await run_query(tmp_path, model, first_prompt(rounds=1), fallback_model="spare-model")
    assert [r.model for r in model.requests] == ["main-model", "spare-model"]
    assert not any(isinstance(b, ThinkingBlock) for m in model.requests[1].messages
                   for b in m.content)
    assert [(f.from_model, f.to_model) for f in run.of(ModelFallback)] == [
        ("main-model", "spare-model")]
    assert run.of(Tombstone)[0].index == 0
    # the fallback model overloaded too: no second switch
    assert run.terminal.reason is TerminalReason.MODEL_ERROR
    assert run.terminal.error.code == "overloaded"


async def test_a_failed_call_keeps_its_blocks_and_answers_their_tool_calls(tmp_path):
    model = ScriptedModel(failure("serverError", before=tool("Bash", command="make")[:2]))
    run = await run_query(tmp_path, model)
    assert run.terminal.reason is TerminalReason.MODEL_ERROR
    assistant, results = run.terminal.messages[-2:]
    assert assistant.content == (ToolUseBlock("t1", "Bash", {"command": "make"}),)
    assert results.content == (ToolResultBlock(
        "t1", "This tool call did not run: the model's response failed.", True),)
    assert [(f.status, f.summary) for f in run.of(ToolCallFinished)] == [
        ("cancelled", "not run: the model's response failed")]
