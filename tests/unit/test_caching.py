"""Where prompt-cache breakpoints go (`heddle.model.caching`), and what the scripted model's
cache accounting makes of a growing agent conversation built with them."""

from __future__ import annotations

import msgspec

from heddle.core.messages import (Message, TextBlock, ThinkingBlock, ToolResultBlock,
                                  ToolUseBlock, user_text)
from heddle.core.stream import ModelRequest
from heddle.model.anthropic_client import request_body
from heddle.model.caching import message_breakpoints
from heddle.scripted.cache import ManualClock, PromptCache
from heddle.scripted.prompt import build_prompt, check_cache_control

SYSTEM = "You are Heddle. " + "Work carefully and check your edits. " * 150  # > 1024 tokens
TOOLS = ({"name": "Read", "description": "Read a file.",
          "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}},)


def reads(*ids: str, thinking: bool = False) -> Message:
    head = (ThinkingBlock("Which files next?", "sig"),) if thinking else ()
    return Message("assistant", head + tuple(ToolUseBlock(i, "Read", {"path": i}) for i in ids))


def results(*ids: str) -> Message:
    return Message("user", tuple(ToolResultBlock(i, f"contents of {i} " * 40) for i in ids))


def answer(text: str) -> Message:
    return Message("assistant", (TextBlock(text),))


def body(messages: tuple[Message, ...], ttl: str | None = "5m") -> dict:
    return msgspec.json.decode(request_body(ModelRequest("m", SYSTEM, messages, TOOLS,
                                                         cache_ttl=ttl)))


def markers(b: dict) -> list[str]:
    found = [f"system.{i}" for i, s in enumerate(b.get("system", []))
             if isinstance(s, dict) and "cache_control" in s]
    found += [f"tools.{i}" for i, t in enumerate(b.get("tools", [])) if "cache_control" in t]
    for n, m in enumerate(b["messages"]):
        found += [f"messages.{n}.content.{k}" for k, block in enumerate(m["content"])
                  if "cache_control" in block]
    return found


def test_a_first_prompt_marks_the_stable_prefix_and_itself():
    b = body((user_text("Fix the bug"),))
    assert b["system"] == [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
    assert markers(b) == ["system.0", "messages.0.content.0"]


def test_the_previous_prompt_and_the_newest_message_are_marked():
    convo = (user_text("Fix the bug"), reads("a"), results("a"))
    assert message_breakpoints(convo) == [(0, 0), (2, 0)]
    parallel = convo + (reads("b", "c", "d"), results("b", "c", "d"))
    assert message_breakpoints(parallel) == [(2, 0), (4, 2)]
    # a new turn: the previous prompt ended with the tool results before the final answer
    next_turn = parallel + (answer("Fixed."), user_text("Thanks, now the tests"))
    assert message_breakpoints(next_turn) == [(4, 2), (6, 0)]


def test_thinking_blocks_never_carry_a_breakpoint_and_stripped_thinking_gets_one_before_it():
    convo = (user_text("Fix the bug"), reads("a", thinking=True), results("a"),
             Message("assistant", (ThinkingBlock("done", "s2"), TextBlock("Fixed."))),
             user_text("And now?"))
    # the API strips the thinking of the first turn: mark just before it (the first prompt)
    assert message_breakpoints(convo) == [(0, 0), (2, 0), (4, 0)]
    assert check_cache_control(body(convo)) is None
    said_first = (user_text("Fix the bug"),
                  Message("assistant", (TextBlock("Looking."), ThinkingBlock("where?", "sig"),
                                        TextBlock("Fixed."))),
                  user_text("And now?"))
    assert message_breakpoints(said_first) == [(0, 0), (1, 0), (2, 0)]  # the text before it


def test_a_position_found_twice_is_marked_once():
    # the previous prompt ended just before the thinking the API now strips: one breakpoint
    convo = (user_text("Fix the bug"),
             Message("assistant", (ThinkingBlock("where?", "sig"), TextBlock("Fixed."))),
             user_text("And now?"))
    assert message_breakpoints(convo) == [(0, 0), (2, 0)]
    assert markers(body(convo)) == ["system.0", "messages.0.content.0", "messages.2.content.0"]


def test_the_lookback_never_marks_a_thinking_block_nor_reaches_past_an_earlier_breakpoint():
    ids = [f"t{i}" for i in range(10)]  # 20 blocks before the newest is the thinking block
    convo = (user_text("Read them all"), reads(*ids, thinking=True), results(*ids))
    assert message_breakpoints(convo) == [(0, 0), (2, 9)]
    assert check_cache_control(body(convo)) is None
    pasted = (Message("user", tuple(TextBlock(f"part {i}") for i in range(25))),
              answer("Read."), user_text("Now fix it"))
    # the previous prompt is 2 blocks back: a block further back would be found anyway
    assert message_breakpoints(pasted) == [(0, 24), (2, 0)]


def test_never_more_than_four_and_a_long_gap_gets_an_intermediate_breakpoint():
    ids = [f"t{i}" for i in range(30)]
    convo = (user_text("Read them all"), reads(*ids), results(*ids))
    # 61 blocks: the previous prompt, the newest block, and one 20 blocks before it
    assert message_breakpoints(convo) == [(0, 0), (2, 9), (2, 29)]
    b = body(convo)
    assert len(markers(b)) == 4 and check_cache_control(b) is None
    assert message_breakpoints(convo, slots=1) == [(2, 29)]
    pasted = (Message("user", tuple(TextBlock(f"part {i}") for i in range(45))),)
    assert message_breakpoints(pasted) == [(0, 4), (0, 24), (0, 44)]


def test_caching_off_sends_no_cache_control_and_the_system_as_a_string():
    b = body((user_text("hi"),), ttl=None)
    assert b["system"] == SYSTEM and markers(b) == []


def test_one_hour_lifetime_on_every_breakpoint():
    b = body((user_text("hi"), reads("a"), results("a")), ttl="1h")
    assert b["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert b["messages"][2]["content"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert check_cache_control(b) is None


def test_each_call_reads_the_whole_previous_prompt():
    """A growing conversation, sent as the loop sends it, accounted as the API does: after
    the first call, every call reads exactly what the call before it sent."""
    cache = PromptCache(ManualClock())
    convo: tuple[Message, ...] = (user_text("Fix the bug"),)
    steps = [reads("a"), reads(*[f"p{i}" for i in range(25)]), reads("b"), answer("Fixed."),
             reads("c"), reads("d")]
    previous_total = None
    for step in steps:
        prompt = build_prompt(body(convo))
        account = cache.account(prompt, model="m", minimum=1024)
        if previous_total is None:
            assert account.read_tokens == 0 and account.creation_tokens > 1024
        else:
            assert account.read_tokens == previous_total, len(convo)
        previous_total = prompt.tokens_at(len(prompt.blocks) - 1)  # through its last block
        convo += (step,)
        ids = [b.id for b in step.content if isinstance(b, ToolUseBlock)]
        convo += (results(*ids),) if ids else (user_text("Now the tests"),)


def test_after_thinking_a_new_turn_reads_up_to_the_first_stripped_thinking_block():
    cache = PromptCache(ManualClock())
    turn = (user_text("Fix the bug " * 30), reads("a", thinking=True), results("a"))
    cache.account(build_prompt(body(turn)), model="m", minimum=1024)
    after = turn + (answer("Fixed."), user_text("And now?"))
    account = cache.account(build_prompt(body(after)), model="m", minimum=1024)
    assert account.read_location == "messages.0.content.0"  # the first prompt, not just system
