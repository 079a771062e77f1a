"""Pure pieces of the loop: messages, sanitising partial responses, transitions."""

import msgspec

from heddle.core.messages import (Message, TextBlock, ThinkingBlock, ToolResultBlock,
                                  ToolUseBlock, append_user, missing_tool_results, to_api,
                                  user_text)
from heddle.loop.endings import sanitize
from heddle.loop.state import ContinueReason, LoopState, Transition, next_turn


def test_append_user_merges_to_keep_roles_alternating():
    messages = (user_text("a"),)
    merged = append_user(messages, (TextBlock("b"),))
    assert merged == (Message("user", (TextBlock("a"), TextBlock("b"))),)
    after_assistant = append_user(merged + (Message("assistant", (TextBlock("x"),)),),
                                  (TextBlock("c"),))
    assert [m.role for m in after_assistant] == ["user", "assistant", "user"]


def test_to_api_is_the_messages_api_shape():
    msgs = (user_text("hi"), Message("assistant", (ToolUseBlock("t1", "Read", {"path": "a"}),)),
            Message("user", (ToolResultBlock("t1", "text", True),)))
    assert msgspec.json.decode(msgspec.json.encode(to_api(msgs))) == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read",
                                           "input": {"path": "a"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": "text", "is_error": True}]}]


def test_missing_tool_results():
    msgs = (user_text("hi"), Message("assistant", (ToolUseBlock("a", "Read", {}),
                                                   ToolUseBlock("b", "Read", {}))),
            Message("user", (ToolResultBlock("a", "ok"),)))
    assert [b.id for b in missing_tool_results(msgs)] == ["b"]


def test_sanitize_drops_empty_text_and_unsigned_or_trailing_thinking():
    blocks = [ThinkingBlock("t", "sig"), TextBlock("  "), ToolUseBlock("a", "Read", {}),
              ThinkingBlock("half", "")]
    assert sanitize(blocks) == (ThinkingBlock("t", "sig"), ToolUseBlock("a", "Read", {}))
    assert sanitize([ThinkingBlock("t", "sig")]) == ()


def test_next_turn_rebuilds_state_and_keeps_the_compact_guard():
    state = LoopState(messages=(user_text("a"),), turn_count=2,
                      max_output_tokens_recovery_count=2, max_output_tokens_override=64000,
                      has_attempted_reactive_compact=True, stop_hook_active=True)
    new = next_turn(state, (Message("assistant", (TextBlock("b"),)),))
    assert new == LoopState(
        messages=state.messages + (Message("assistant", (TextBlock("b"),)),), turn_count=3,
        transition=Transition(ContinueReason.NEXT_TURN), max_output_tokens_recovery_count=0,
        max_output_tokens_override=None, has_attempted_reactive_compact=True,
        stop_hook_active=True)
    assert len(ContinueReason) == 7
