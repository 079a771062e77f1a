"""Framing: FdReader over a real pipe, tolerant header parsing."""

import asyncio
import os
import threading

from heddle.rpc.framing import BadInput, FdReader
from heddle.rpc.transport import StdioTransport, frame


async def test_reader_resyncs_after_garbage_and_accepts_any_header_case():
    r, w = os.pipe()
    received = []
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    transport = StdioTransport(FdReader(r), open(os.devnull, "wb"), loop, received.append,
                               lambda why: done.set())
    transport.start()
    data = (b"garbage line\r\n\r\n" + b"content-length: 7\r\nContent-Type: x\r\n\r\n{\"a\":1}"
            + frame(b"{bad") + frame(b'{"b":[1,2]}'))
    threading.Thread(target=lambda: (os.write(w, data), os.close(w))).start()
    await asyncio.wait_for(done.wait(), 5)
    assert received[0] == {"a": 1}
    assert isinstance(received[1], BadInput)
    assert received[2] == {"b": [1, 2]}
    transport.close()
