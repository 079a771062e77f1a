"""How a query goes round and how it ends, in-process: tool rounds, the guards, stop hooks, the
token budget, and cancels that land while the model streams or while tools run."""

from __future__ import annotations

import anyio

from heddle.context.windows import Limits
from heddle.core.events import MessageFinal, TerminalReason, ToolCallFinished
from heddle.core.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from heddle.loop.endings import CANCELLED_RESULT, INTERRUPTED
from heddle.loop.hooks import StopHookOutcome
from heddle.permissions.policy import PermissionPolicy

from loop.fakes import (Hang, Hold, ListedStopHooks, ScriptedModel, run_query, text, tool)


async def test_tool_results_go_round_to_the_model(tmp_path):
    (tmp_path / "notes.txt").write_text("remember the milk\n")
    model = ScriptedModel(tool("Read", path="notes.txt"), text("It says milk."))
    run = await run_query(tmp_path, model)
    assert run.terminal.reason is TerminalReason.COMPLETED
    assert run.terminal.transitions == ("next_turn",)
    result = model.requests[1].messages[-1].content[0]
    assert isinstance(result, ToolResultBlock) and "remember the milk" in result.content
    assert model.requests[0].tools and {t["name"] for t in model.requests[0].tools} >= {"Read"}
    assert run.terminal.usage.output_tokens == 20  # both calls count


async def test_the_permission_decider_passed_in_decides_every_call(tmp_path):
    model = ScriptedModel(tool("Write", path="x.txt", content="x"), text("I could not."))
    run = await run_query(tmp_path, model, permissions=PermissionPolicy(mode="plan"))
    result = model.requests[1].messages[-1].content[0]
    assert result.is_error and "not available in plan mode" in result.content
    assert not (tmp_path / "x.txt").exists()
    assert [f.status for f in run.of(ToolCallFinished)] == ["rejected"]


async def test_the_guards_stop_before_a_model_call(tmp_path):
    looping = ScriptedModel(tool("Read", path="."))
    capped = await run_query(tmp_path, looping, max_turns=2)
    assert (capped.terminal.reason, len(looping.requests)) == (TerminalReason.MAX_TURNS, 2)
    spent = await run_query(tmp_path, ScriptedModel(tool("Read", path=".")), task_budget=200)
    assert spent.terminal.reason is TerminalReason.TOKEN_BUDGET
    assert spent.terminal.error.message == ("the task budget of 200 tokens is spent "
                                            "(220 used)")
    never = ScriptedModel(text("unused"))
    # a window of 3,100 tokens keeps 100 for the answer and 3,000 in reserve: nothing fits
    blocked = await run_query(tmp_path, never, limits=Limits(window=3_100, max_output=100))
    assert blocked.terminal.reason is TerminalReason.BLOCKING_LIMIT and never.requests == []


async def test_a_stop_hook_sends_the_model_back_once_then_can_prevent(tmp_path):
    hooks = ListedStopHooks([StopHookOutcome(blocking=["run the tests"])])
    model = ScriptedModel(text("Done."), text("Tests pass."))
    run = await run_query(tmp_path, model, stop_hooks=hooks)
    assert run.terminal.transitions == ("stop_hook_blocking",)
    assert run.terminal.text == "Tests pass." and len(hooks.payloads) == 1
    assert model.requests[1].messages[-1].content == (
        TextBlock("Stop hook feedback:\n- run the tests"),)
    prevented = await run_query(tmp_path, ScriptedModel(text("Done.")),
                                stop_hooks=ListedStopHooks([StopHookOutcome(prevent="no")]))
    assert prevented.terminal.reason is TerminalReason.STOP_HOOK_PREVENTED
    assert prevented.terminal.error.message == "no"


async def test_the_token_budget_keeps_the_model_working(tmp_path):
    run = await run_query(tmp_path, ScriptedModel(text("more")), token_budget=40)
    # 10 output tokens a call: continue at 10, 20 and 30, stop at 40 (over 90% of it)
    assert run.terminal.transitions == ("token_budget_continuation",) * 3
    assert run.terminal.reason is TerminalReason.COMPLETED


async def test_a_cancel_while_streaming_keeps_the_text_and_adds_a_note(tmp_path):
    for reason, note in ((None, (TextBlock(INTERRUPTED),)), ("interrupt", ())):
        scope = anyio.CancelScope()
        model = ScriptedModel([*text("half an ans")[:2], Hang(scope)])
        run = await run_query(tmp_path, model, scope=scope, abort_reason=reason)
        assert run.terminal.reason is TerminalReason.ABORTED_STREAMING
        assert run.terminal.messages[-2 if note else -1] == Message(
            "assistant", (TextBlock("half an ans"),))
        if note:
            assert run.terminal.messages[-1] == Message("user", note)


async def test_a_cancel_while_tools_run_gives_every_call_a_result(tmp_path):
    scope = anyio.CancelScope()
    model = ScriptedModel(tool("Hold"))
    run = await run_query(tmp_path, model, scope=scope, tools={"Hold": Hold(scope)})
    assert run.terminal.reason is TerminalReason.ABORTED_TOOLS
    assistant, user = run.terminal.messages[-2:]
    assert assistant.content == (ToolUseBlock("t1", "Hold", {}),)
    assert user.content == (ToolResultBlock("t1", CANCELLED_RESULT, True),
                            TextBlock(INTERRUPTED))
    assert [f.status for f in run.of(ToolCallFinished)] == ["cancelled"]
    assert run.of(MessageFinal)[-1].message == Message("user", user.content)
