"""Live tool output in the turn emitter: bounded per event and call, decoded safely, never
queued ahead of control events while the client is behind."""

import asyncio

from heddle.core import events as core
from heddle.rpc.emitter import TurnEmitter
from heddle.rpc.output import OUTPUT_CALL_BYTES, OUTPUT_EVENT_BYTES, OUTPUT_INTERVAL
from heddle.rpc.transport import Pressure


def kinds(sent):
    return [p.event.__struct_config__.tag for p in sent]


def chunk(data: bytes, call: str = "c1", stream: str = "combined") -> core.ToolOutputChunk:
    return core.ToolOutputChunk(call, stream, data)


def finished(call: str = "c1") -> core.ToolCallFinished:
    return core.ToolCallFinished(call, "Bash", "ok", "exit 0", exit_code=0)


async def test_a_big_read_keeps_its_newest_bytes_and_counts_the_rest():
    sent = []
    em = TurnEmitter("s", "t", sent.append, Pressure())
    data = "€".encode() * 30_000  # 3 bytes each: the newest 16 KiB begin inside one
    em(chunk(data[:2]))  # a part of a character, which waits for the rest
    em(chunk(data[2:]))
    await asyncio.sleep(0)
    em(finished())
    (out,) = [p.event for p in sent if p.event.__struct_config__.tag == "toolOutput"]
    assert set(out.text) == {"€"}  # no U+FFFD from the part of a character at the cut
    assert out.elided + len(out.text.encode()) == len(data)
    assert len(out.text.encode()) <= OUTPUT_EVENT_BYTES
    assert kinds(sent)[-2:] == ["toolOutput", "toolCallFinished"]


async def test_one_event_per_interval_and_nothing_live_past_the_call_cap():
    sent = []
    em = TurnEmitter("s", "t", sent.append, Pressure())
    piece = b"x" * 4096
    total = 0
    loop = asyncio.get_running_loop()
    deadline = loop.time() + OUTPUT_INTERVAL * 40
    while loop.time() < deadline:
        em(chunk(piece))
        total += len(piece)
        await asyncio.sleep(OUTPUT_INTERVAL / 8)
    live = [p.event for p in sent]
    em(finished())
    outputs = [p.event for p in sent if p.event.__struct_config__.tag == "toolOutput"]
    assert len(live) <= 41
    assert sum(len(o.text) for o in live) <= OUTPUT_CALL_BYTES + OUTPUT_EVENT_BYTES
    assert sum(len(o.text) + (o.elided or 0) for o in outputs) == total
    assert outputs[-1].elided  # the tail after the cap, the middle counted


async def test_while_behind_output_waits_outside_the_queue():
    pressure = Pressure()
    sent = []
    em = TurnEmitter("s", "t", sent.append, pressure)
    em(chunk(b"first\n"))
    await asyncio.sleep(0)
    assert kinds(sent) == ["toolOutput"]
    pressure.set(True)
    for i in range(200):
        em(chunk(b"%05d " % i * 200))
        em(chunk(b"hook says\n", "c2", "stderr"))
    await asyncio.sleep(OUTPUT_INTERVAL * 2)
    em(core.PermissionAsked("c3", "Run: ls"))  # sent at once, whatever the pressure
    em(finished())
    assert kinds(sent) == ["toolOutput", "permissionAsked"]
    assert em.queued == 2  # c1's last output and its end; c2's output is not in the queue

    pressure.set(False)
    assert kinds(sent) == ["toolOutput", "permissionAsked", "toolOutput", "toolCallFinished",
                           "toolOutput"]
    tail, other = sent[2].event, sent[4].event
    assert tail.tool_call_id == "c1" and tail.elided and len(tail.text) <= OUTPUT_EVENT_BYTES
    assert other.tool_call_id == "c2" and other.stream == "stderr"
    assert [p.seq for p in sent] == list(range(len(sent)))


async def test_output_after_the_end_of_its_call_or_turn_is_not_sent():
    sent = []
    em = TurnEmitter("s", "t", sent.append, Pressure())
    em(chunk(b"\xe2\x82"))  # half a character: the end shows it as U+FFFD
    em(finished())
    em(chunk(b"late\n"))
    em(chunk(b"stop hook\n", call=""))
    em(core.TurnEnded(core.TerminalReason.COMPLETED, core.Usage()))
    em(chunk(b"later\n", call=""))
    await asyncio.sleep(OUTPUT_INTERVAL * 2)
    em.flush()
    assert kinds(sent) == ["toolOutput", "toolCallFinished", "toolOutput", "turnEnded"]
    assert sent[0].event.text == "\ufffd" and sent[2].event.text == "stop hook\n"


async def test_a_sub_agents_output_goes_under_its_task_call():
    sent = []
    em = TurnEmitter("s", "t", sent.append, Pressure())
    em(core.AgentEvent("task1", "survey", core.ToolOutputChunk("c9", "stderr", b"ok\n",
                                                               "PreToolUse")))
    em(core.AgentEvent("task1", "survey", finished("c9")))
    (out, end) = [p.event for p in sent]
    assert (out.tool_call_id, out.agent) == ("task1", "survey")
    assert (out.event.tool_call_id, out.event.text, out.event.hook) == ("c9", "ok\n",
                                                                         "PreToolUse")
    assert end.event.__struct_config__.tag == "toolCallFinished"
