"""Delta coalescing and sequence numbers of the per-turn event stream."""

import asyncio

from heddle.core import events as core
from heddle.core.messages import Message, TextBlock
from heddle.rpc.emitter import FLUSH_CHARS, TurnEmitter


def kinds_and_text(sent):
    return [(p.event.__struct_config__.tag, getattr(p.event, "text", None)) for p in sent]


async def test_deltas_merge_until_another_event():
    sent = []
    em = TurnEmitter("s", "t", sent.append)
    for piece in ["Hel", "lo", " world"]:
        em(core.TextDelta(piece))
    em(core.ToolCallStarted("c1", "Read"))
    em(core.TextDelta("!"))
    em.flush()
    assert kinds_and_text(sent) == [("textDelta", "Hello world"), ("toolCallStarted", None),
                                    ("textDelta", "!")]
    assert [p.seq for p in sent] == [0, 1, 2]


async def test_deltas_flush_on_size_and_on_time():
    sent = []
    em = TurnEmitter("s", "t", sent.append)
    em(core.TextDelta("x" * FLUSH_CHARS))
    assert len(sent) == 1
    em(core.TextDelta("late"))
    assert len(sent) == 1
    await asyncio.sleep(0.05)
    assert sent[-1].event.text == "late"


async def test_thinking_and_text_do_not_mix():
    sent = []
    em = TurnEmitter("s", "t", sent.append)
    em(core.ThinkingDelta("hmm"))
    em(core.TextDelta("answer"))
    em.flush()
    assert kinds_and_text(sent) == [("thinkingDelta", "hmm"), ("textDelta", "answer")]


async def test_internal_events_are_not_sent():
    sent = []
    em = TurnEmitter("s", "t", sent.append)
    em(core.MessageFinal(Message("assistant", (TextBlock("x"),))))
    em(core.UsageReport(core.Usage(input_tokens=5)))
    em.flush()
    assert kinds_and_text(sent) == [("usage", None)]
    assert sent[0].event.usage.input_tokens == 5
