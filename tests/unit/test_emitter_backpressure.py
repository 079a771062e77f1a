"""Text deltas while the client is behind: held and merged, sent on relief, never reordered."""

import asyncio
import os
import threading
import time

import msgspec

from heddle.core import events as core
from heddle.rpc.emitter import (BACKLOG_CHARS, FLUSH_CHARS, FLUSH_DELAY, PAUSE_CHARS,
                                PAUSE_EVENTS, TurnEmitter)
from heddle.frames import Decoder, encode as frame
from heddle.rpc.framing import FdReader
from heddle.rpc.transport import HIGH_WATER, Pressure, StdioTransport


def described(sent):
    return [(p.event.__struct_config__.tag, getattr(p.event, "text", None)) for p in sent]


def text_of(sent, kind="textDelta"):
    return "".join(p.event.text for p in sent if p.event.__struct_config__.tag == kind)


async def test_held_while_behind_then_sent_merged_on_relief():
    pressure = Pressure()
    sent = []
    em = TurnEmitter("s", "t", sent.append, pressure)
    pressure.set(True)
    pieces = [f"piece {i} " for i in range(3000)]
    for piece in pieces:
        em(core.TextDelta(piece))
    await asyncio.sleep(FLUSH_DELAY * 3)
    assert sent == []
    assert em.holding == sum(map(len, pieces))

    pressure.set(False)
    assert text_of(sent) == "".join(pieces)
    assert all(len(p.event.text) <= BACKLOG_CHARS for p in sent)
    assert len(sent) < len(pieces) // 100
    assert [p.seq for p in sent] == list(range(len(sent)))
    assert em.holding == 0


async def test_while_behind_every_event_waits_in_order_and_goes_out_on_relief():
    pressure = Pressure()
    sent = []
    em = TurnEmitter("s", "t", sent.append, pressure)
    em.started("p", "m")
    pressure.set(True)
    em(core.TextDelta("before "))
    em(core.TextDelta("the tool"))
    em(core.ToolCallStarted("c1", "Read"))
    em(core.ToolCallFinished("c1", "Read", "ok", "3 lines"))
    em(core.TextDelta("after"))
    em(core.ThinkingDelta("hmm"))
    await asyncio.sleep(FLUSH_DELAY * 3)
    assert described(sent) == [("turnStarted", None)]
    assert em.queued == 5

    pressure.set(False)
    assert described(sent) == [("turnStarted", None), ("textDelta", "before the tool"),
                               ("toolCallStarted", None), ("toolCallFinished", None),
                               ("textDelta", "after"), ("thinkingDelta", "hmm")]
    assert [p.seq for p in sent] == list(range(6))
    assert em.queued == 0


async def test_a_permission_prompt_and_the_end_of_the_turn_send_everything_at_once():
    pressure = Pressure()
    sent = []
    em = TurnEmitter("s", "t", sent.append, pressure)
    pressure.set(True)
    em.started("p", "m")
    em(core.TextDelta("let me edit"))
    em(core.ToolCallStarted("c1", "Edit"))
    em(core.PermissionAsked("c1", "Edit app.py"))  # the permission request comes right after
    assert described(sent) == [("turnStarted", None), ("textDelta", "let me edit"),
                               ("toolCallStarted", None), ("permissionAsked", None)]
    em(core.PermissionAnswered("c1", "allowOnce"))
    em(core.TextDelta("done"))
    assert len(sent) == 4
    em.flush()  # the turn/start answer comes right after
    assert described(sent)[4:] == [("permissionAnswered", None), ("textDelta", "done")]
    assert [p.seq for p in sent] == list(range(6))
    pressure.set(False)  # nothing left for the relief to send
    assert len(sent) == 6


async def test_turns_with_held_text_take_turns_when_the_client_catches_up():
    pressure = Pressure()
    order = []

    def send_as(name):
        def send(params):
            order.append(name)
            if len(order) % 2 == 0:  # the client falls behind again after every other message
                pressure.set(True)
                asyncio.get_running_loop().call_soon(pressure.set, False)
        return send

    a = TurnEmitter("s1", "a", send_as("a"), pressure)
    b = TurnEmitter("s2", "b", send_as("b"), pressure)
    pressure.set(True)
    for _ in range(6):
        for em in (a, b):
            em(core.TextDelta("x" * BACKLOG_CHARS))
    pressure.set(False)
    for _ in range(50):
        if a.holding == 0 and b.holding == 0:
            break
        await asyncio.sleep(0)
    assert a.holding == 0 and b.holding == 0
    assert order.count("a") == order.count("b") == 6
    assert "b" in order[:3]  # b did not wait for all of a's text


async def test_writable_waits_while_the_turn_holds_too_much():
    pressure = Pressure()
    em = TurnEmitter("s", "t", lambda p: None, pressure)
    await asyncio.wait_for(em.writable(), 1)
    pressure.set(True)
    em(core.TextDelta("x" * PAUSE_CHARS))
    waiting = asyncio.ensure_future(em.writable())
    await asyncio.sleep(0.01)
    assert not waiting.done()
    pressure.set(False)
    await asyncio.wait_for(waiting, 1)


async def test_a_slow_reader_over_a_real_pipe_gets_all_text_in_order_with_bounded_buffering():
    loop = asyncio.get_running_loop()
    pressure = Pressure()
    out_r, out_w = os.pipe()
    in_r, in_w = os.pipe()
    stdout = os.fdopen(out_w, "wb")
    transport = StdioTransport(FdReader(in_r), stdout, loop, lambda m: None, lambda why: None,
                               pressure=pressure)
    transport.start()
    encoder = msgspec.json.Encoder()
    em = TurnEmitter("s", "t", lambda params: transport.write(frame(encoder.encode(
        {"jsonrpc": "2.0", "method": "turn/event", "params": params}))), pressure)

    received = bytearray()
    reading = threading.Event()
    done = threading.Event()

    def client():
        while True:
            reading.wait()
            chunk = os.read(out_r, 4096)
            if not chunk:
                done.set()
                return
            received.extend(chunk)

    threading.Thread(target=client, daemon=True).start()
    deltas = [f"{i:019d} " for i in range(40_000)]  # 800 KB of text in tiny deltas
    for i, d in enumerate(deltas):
        em(core.TextDelta(d))
        if i % 4_000 == 3_999:  # a tool round now and then
            em(core.ToolCallStarted(f"c{i}", "Read"))
            em(core.ToolCallFinished(f"c{i}", "Read", "ok", "1 line"))
        if i % 500 == 0:
            await asyncio.sleep(0)
        if i == 20_000:
            # 400 KB so far and nothing read: more than the pipe and the buffer take
            assert pressure.backed_up and em.holding > 0
            reading.set()  # the client starts reading, while the model still streams
    for _ in range(2000):  # the client reads: held text goes out as it catches up
        if not em.holding:
            break
        await asyncio.sleep(0.01)
    assert em.holding == 0
    # While behind, at most one notification more than the high-water mark was buffered.
    assert transport.peak_buffered <= HIGH_WATER + BACKLOG_CHARS + FLUSH_CHARS + 1024
    em(core.ToolCallStarted("c1", "Read"))
    em.flush()
    while transport.buffered:
        await asyncio.sleep(0.01)
    transport.close()
    stdout.close()
    os.close(in_w)
    for _ in range(2000):
        if done.is_set():
            break
        await asyncio.sleep(0.01)
    assert done.is_set()

    messages = [msgspec.json.decode(body)["params"] for body in Decoder().messages(bytes(received))]
    assert [m["seq"] for m in messages] == list(range(len(messages)))
    assert messages[-1]["event"]["kind"] == "toolCallStarted"
    texts = [m["event"].get("text") for m in messages]
    assert "".join(t for t in texts if t) == "".join(deltas)
    tools = [i for i, m in enumerate(messages) if m["event"]["kind"] == "toolCallStarted"]
    assert len(tools) == 11
    for n, i in enumerate(tools[:-1]):  # each tool round sits exactly after its text
        assert "".join(t for t in texts[:i] if t) == "".join(deltas[:4_000 * (n + 1)])
    assert len(messages) < len(deltas) // 20


async def test_without_pressure_text_goes_out_at_the_size_and_time_limits():
    sent = []
    em = TurnEmitter("s", "t", sent.append, Pressure())
    em(core.TextDelta("x" * FLUSH_CHARS))
    assert len(sent) == 1
    em(core.TextDelta("late"))
    assert len(sent) == 1
    await asyncio.sleep(FLUSH_DELAY * 4)
    assert sent[-1].event.text == "late"


async def test_text_after_a_pause_goes_out_without_waiting_and_a_busy_stream_is_paced():
    # "within FLUSH_DELAY" is a matter of the clock the emitter reads (time.monotonic): an
    # attempt counts only if our own readings around it prove the second delta came within
    # FLUSH_DELAY of the first notification; a preempted attempt is tried again (bounded)
    for _ in range(100):
        sent = []
        em = TurnEmitter("s", "t", sent.append, Pressure())
        em(core.TextDelta("first "))
        em(core.TextDelta("burst"))  # arrived together: merged, then sent once the burst is done
        before_first = time.monotonic()
        await asyncio.sleep(0)
        assert described(sent) == [("textDelta", "first burst")]
        em(core.TextDelta("right after"))  # within FLUSH_DELAY of the last notification: waits
        await asyncio.sleep(0)
        if time.monotonic() - before_first < FLUSH_DELAY:
            break
        await asyncio.sleep(FLUSH_DELAY * 4)  # let the timer run out before the next attempt
    else:
        raise AssertionError("no attempt came within FLUSH_DELAY: the machine is frozen")
    assert len(sent) == 1
    await asyncio.sleep(FLUSH_DELAY * 4)
    assert described(sent)[1] == ("textDelta", "right after")
    assert [p.seq for p in sent] == [0, 1]
    em(core.TextDelta("after a pause"))  # FLUSH_DELAY after the last notification: at once
    await asyncio.sleep(0)
    assert described(sent)[2] == ("textDelta", "after a pause")
    assert [p.seq for p in sent] == [0, 1, 2]


async def test_behind_only_for_a_turn_that_holds_much_while_the_client_is_behind():
    pressure = Pressure()
    busy = TurnEmitter("s", "busy", lambda p: None, pressure)
    quiet = TurnEmitter("s2", "quiet", lambda p: None, pressure)
    busy(core.TextDelta("x" * PAUSE_CHARS))
    assert not busy.behind  # the client keeps up
    pressure.set(True)
    busy(core.TextDelta("y" * PAUSE_CHARS))
    quiet(core.TextDelta("a few words"))
    assert busy.behind and not quiet.behind
    many = TurnEmitter("s3", "many", lambda p: None, pressure)
    for i in range(PAUSE_EVENTS):
        many(core.UsageReport(core.Usage(input_tokens=i)))
    assert many.behind
    pressure.set(False)
    assert not busy.behind and not many.behind and busy.holding == 0


async def test_cancelling_a_wait_for_the_client():
    pressure = Pressure()
    em = TurnEmitter("s", "t", lambda p: None, pressure)
    pressure.set(True)
    em(core.TextDelta("x" * PAUSE_CHARS))
    waiting = asyncio.ensure_future(em.writable())
    await asyncio.sleep(0)  # the task runs up to its wait
    assert not waiting.done()
    waiting.cancel()
    try:
        await asyncio.wait_for(waiting, 5)
    except asyncio.CancelledError:
        pass
    assert waiting.cancelled()
    pressure.set(False)  # the abandoned wait does not break the relief
    assert not pressure.backed_up and not em.behind and em.holding == 0
