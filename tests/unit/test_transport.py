"""The reader thread over a real pipe: messages in order, and whatever happens it either goes
on or reports the input closed, so the daemon never goes deaf."""

import asyncio
import logging
import os
import threading

from heddle.frames import encode as frame
from heddle.rpc.framing import BadInput, FdReader
from heddle.rpc.transport import StdioTransport


def start(loop, stdin, on_message, closed: asyncio.Event, why: list):
    transport = StdioTransport(stdin, open(os.devnull, "wb"), loop, on_message,
                               lambda reason: (why.append(reason), closed.set()))
    transport.start()
    return transport


async def test_reader_resyncs_after_garbage_and_accepts_any_header_case():
    r, w = os.pipe()
    received, why = [], []
    done = asyncio.Event()
    transport = start(asyncio.get_running_loop(), FdReader(r), received.append, done, why)
    data = (b"garbage line\r\n\r\n" + b"content-length: 7\r\nContent-Type: x\r\n\r\n{\"a\":1}"
            + frame(b"{bad") + frame(b'{"b":[1,2]}'))
    threading.Thread(target=lambda: (os.write(w, data), os.close(w))).start()
    await asyncio.wait_for(done.wait(), 5)
    assert received[0] == {"a": 1}
    assert isinstance(received[1], BadInput) and received[1].code == -32700
    assert received[2] == {"b": [1, 2]}
    assert why == ["stdin closed"]
    transport.close()
    os.close(r)


async def test_a_reader_that_fails_in_any_way_reports_the_input_closed(caplog):
    for stdin, error in [(FdReader(os.open(os.devnull, os.O_WRONLY)), "Bad file descriptor"),
                         (FdReader("not a descriptor"), "integer")]:  # a bug, say
        done, why = asyncio.Event(), []
        with caplog.at_level(logging.INFO, logger="heddle.rpc.transport"):
            transport = start(asyncio.get_running_loop(), stdin, lambda m: None, done, why)
            await asyncio.wait_for(done.wait(), 5)
        assert why == ["reading stdin failed"]
        assert any(r.levelno == logging.ERROR and error in r.getMessage() for r in caplog.records)
        transport.close()
        caplog.clear()


async def test_a_message_whose_handler_fails_does_not_stop_the_next(caplog):
    r, w = os.pipe()
    handled, why = [], []
    done = asyncio.Event()

    def on_message(message):
        handled.append(message)
        if message == 1:
            raise RuntimeError("boom")

    transport = start(asyncio.get_running_loop(), FdReader(r), on_message, done, why)
    os.write(w, frame(b"1") + frame(b"2"))
    os.close(w)
    with caplog.at_level(logging.ERROR, logger="heddle.rpc.transport"):
        await asyncio.wait_for(done.wait(), 5)
    assert handled == [1, 2]
    assert "handling a message failed: boom" in caplog.text
    transport.close()
    os.close(r)


async def test_a_writer_that_fails_in_any_way_reports_the_output_closed(caplog):
    r, w = os.pipe()
    done, why = asyncio.Event(), []
    text_mode = open(os.devnull, "w")  # write(bytes) raises TypeError: a bug, say
    transport = StdioTransport(FdReader(r), text_mode, asyncio.get_running_loop(),
                               lambda m: None, lambda reason: (why.append(reason), done.set()))
    transport.start()
    with caplog.at_level(logging.INFO, logger="heddle.rpc.transport"):
        transport.write(frame(b"{}"))
        await asyncio.wait_for(done.wait(), 5)
    assert why == ["writing stdout failed"]
    assert "writing stdout failed: write() argument must be str" in caplog.text
    transport.write(frame(b"{}"))  # ignored once closed
    assert transport.buffered == 0
    transport.close()
    text_mode.close()
    os.close(w)
    os.close(r)
