"""The stdout writer over real pipes: order, a client that stops reading, back-pressure, close;
and the back-pressure on stdin for a client that sends and does not read."""

import asyncio
import io
import os
import threading
import time

from heddle.frames import Decoder, encode as frame
from heddle.rpc.framing import FdReader
from heddle.rpc.transport import (HANGUP_POLL, HIGH_WATER, LOW_WATER, MAX_BACKLOG, MAX_WRITE,
                                  READ_PAUSE, READ_RESUME, Pressure, StdioTransport)


class Client:
    """The editor's end of the daemon's stdout: a thread that reads when allowed to."""

    def __init__(self, fd: int, reading: bool = True):
        self.fd = fd
        self.data = bytearray()
        self.allowed = threading.Event()
        if reading:
            self.allowed.set()
        self.eof = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        while True:
            self.allowed.wait()
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                self.eof.set()
                return
            self.data += chunk

    def messages(self) -> list[bytes]:
        return list(Decoder().messages(bytes(self.data)))


def make(loop, pressure, on_close=lambda why: None):
    out_r, out_w = os.pipe()
    in_r, in_w = os.pipe()
    transport = StdioTransport(FdReader(in_r), os.fdopen(out_w, "wb"), loop, lambda m: None,
                               on_close, pressure=pressure)
    transport.start()
    return transport, out_r, in_w


async def wait_until(predicate, timeout=10.0):
    async def poll():
        while not predicate():
            await asyncio.sleep(0.005)
    await asyncio.wait_for(poll(), timeout)


async def test_messages_arrive_whole_and_in_order():
    loop = asyncio.get_running_loop()
    transport, out_r, in_w = make(loop, Pressure())
    client = Client(out_r)
    bodies = [b'{"n":%d,"pad":"%s"}' % (i, b"x" * (i * 997 % 150_000)) for i in range(300)]
    for body in bodies:
        transport.write(frame(body))
        if len(body) % 7 == 0:
            await asyncio.sleep(0)
    await wait_until(lambda: transport.buffered == 0)
    transport.close()
    os.close(in_w)
    await wait_until(lambda: len(client.messages()) == len(bodies))
    assert client.messages() == bodies


async def test_a_client_that_stops_reading_never_blocks_the_loop_and_gets_everything_later():
    loop = asyncio.get_running_loop()
    pressure = Pressure()
    relieved = []
    transport, out_r, in_w = make(loop, pressure)
    client = Client(out_r, reading=False)
    body = b'{"text":"%s"}' % (b"y" * 4000)
    count = (HIGH_WATER * 3) // len(body)
    for _ in range(count):  # far more than the pipe holds: each write returns at once
        transport.write(frame(body))
    assert transport.buffered > HIGH_WATER
    assert pressure.backed_up
    pressure.when_relieved(lambda: relieved.append(transport.buffered))

    client.allowed.set()
    await wait_until(lambda: relieved)
    assert relieved[0] <= LOW_WATER
    assert not pressure.backed_up
    await wait_until(lambda: transport.buffered == 0)
    await wait_until(lambda: len(client.messages()) == count)
    assert client.messages() == [body] * count
    assert transport.peak_buffered >= HIGH_WATER
    transport.close()
    os.close(in_w)


async def test_pressure_wait_returns_at_once_when_not_behind_and_after_relief_otherwise():
    pressure = Pressure()
    await asyncio.wait_for(pressure.wait(), 1)
    pressure.set(True)
    waiter = asyncio.ensure_future(pressure.wait())
    await asyncio.sleep(0.01)
    assert not waiter.done()
    pressure.set(False)
    await asyncio.wait_for(waiter, 1)


async def test_a_closed_pipe_reports_once_and_later_writes_are_ignored():
    loop = asyncio.get_running_loop()
    closed = []
    pressure = Pressure()
    transport, out_r, in_w = make(loop, pressure, on_close=closed.append)
    os.close(out_r)
    for _ in range(3):
        transport.write(frame(b'{"after":"close"}'))
    await wait_until(lambda: closed)
    await asyncio.sleep(0.01)
    assert closed == ["stdout closed"]
    assert transport.buffered == 0 and not pressure.backed_up
    transport.close()
    os.close(in_w)


async def test_close_writes_what_is_buffered_and_gives_up_on_a_client_that_never_reads():
    loop = asyncio.get_running_loop()
    transport, out_r, in_w = make(loop, Pressure())
    client = Client(out_r)
    client.allowed.clear()
    body = b'{"z":"%s"}' % (b"z" * 10_000)
    for _ in range(20):
        transport.write(frame(body))
    client.allowed.set()
    transport.close(timeout=10)
    await wait_until(lambda: len(client.messages()) == 20)

    stuck, stuck_r, stuck_in = make(loop, Pressure())
    for _ in range(20):
        stuck.write(frame(body))
    stuck.close(timeout=0.05)  # returns although nobody reads
    assert stuck.buffered == 0
    for fd in (in_w, stuck_r, stuck_in):
        os.close(fd)


async def test_writes_from_other_threads_are_sent_too():
    loop = asyncio.get_running_loop()
    transport, out_r, in_w = make(loop, Pressure())
    client = Client(out_r)
    threads = [threading.Thread(target=transport.write, args=(frame(b'{"t":%d}' % i),))
               for i in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    await wait_until(lambda: len(client.messages()) == 5)
    assert sorted(client.messages()) == sorted(b'{"t":%d}' % i for i in range(5))
    transport.close()
    os.close(in_w)


async def test_any_binary_output_works():
    loop = asyncio.get_running_loop()
    out = io.BytesIO()
    in_r, in_w = os.pipe()
    transport = StdioTransport(FdReader(in_r), out, loop, lambda m: None, lambda why: None,
                               pressure=Pressure())
    transport.start()
    transport.write(frame(b"{}"))
    transport.write(frame(b"[]"))
    transport.close(timeout=10)
    assert out.getvalue() == frame(b"{}") + frame(b"[]")
    os.close(in_w)


class Sender:
    """The editor's end of the daemon's stdin: a thread that writes `count` messages, each
    write blocking while the pipe is full, then closes it (unless told to keep it open)."""

    def __init__(self, fd: int, message: bytes, count: int, close: bool = True):
        self.sent = 0
        self.done = threading.Event()

        def run():
            for _ in range(count):
                view = memoryview(message)
                while view:
                    view = view[os.write(fd, view):]
                self.sent += 1
            if close:
                os.close(fd)
            self.done.set()
        threading.Thread(target=run, daemon=True).start()


async def test_a_client_that_reads_no_answers_is_not_read_until_it_reads():
    loop = asyncio.get_running_loop()
    out_r, out_w = os.pipe()
    in_r, in_w = os.pipe()
    answer = frame(b'{"answer":"%s"}' % (b"a" * 80))
    transport = StdioTransport(FdReader(in_r), os.fdopen(out_w, "wb"), loop,
                               lambda message: transport.write(answer), lambda why: None,
                               pressure=Pressure())
    transport.start()
    count = 30_000  # 3.6 MB of answers
    sender = Sender(in_w, frame(b'{"q":1}'), count)
    await wait_until(lambda: transport.pauses == 1, 30)
    assert sender.sent < count / 2  # it is held back: the daemon stopped reading
    bound = READ_PAUSE + (MAX_BACKLOG + 2) * len(answer)  # what it had read when it stopped
    await wait_until(lambda: transport.backlog == 0)
    assert transport.buffered <= transport.peak_buffered <= bound

    client = Client(out_r)  # the client reads: every answer arrives, and the rest is read
    await wait_until(lambda: sender.done.is_set() and len(client.data) == count * len(answer), 30)
    assert client.messages() == [b'{"answer":"%s"}' % (b"a" * 80)] * count
    assert transport.peak_buffered <= bound
    assert transport.pauses >= 1 and not transport.paused
    transport.close()


async def test_stdin_closing_while_it_is_not_read_still_stops_the_daemon():
    loop = asyncio.get_running_loop()
    out_r, out_w = os.pipe()
    in_r, in_w = os.pipe()
    closed = []
    answer = frame(b'{"answer":"%s"}' % (b"a" * 80))
    transport = StdioTransport(FdReader(in_r), os.fdopen(out_w, "wb"), loop,
                               lambda message: transport.write(answer), closed.append,
                               pressure=Pressure())
    transport.start()
    os.set_blocking(in_w, False)
    request = frame(b'{"q":1}')
    pending = b""
    # write what the pipe takes until the daemon stops reading for the answers left unread
    while not (transport.paused and transport.buffered > READ_PAUSE):
        pending = pending or request
        try:
            pending = pending[os.write(in_w, pending):]
        except BlockingIOError:
            await asyncio.sleep(0.005)
    os.close(in_w)  # the client goes away; its stdout (our out_r) stays open, never read
    await wait_until(lambda: closed, 10)
    assert closed == ["stdin closed while it was not read"]
    assert transport.paused is False and transport.buffered > READ_PAUSE
    transport.close(timeout=0.05)
    os.close(out_r)


async def test_reading_stops_while_the_loop_has_not_handled_enough_of_what_was_read():
    loop = asyncio.get_running_loop()
    in_r, in_w = os.pipe()
    handled = []
    transport = StdioTransport(FdReader(in_r), open(os.devnull, "wb"), loop, handled.append,
                               lambda why: None, pressure=Pressure())
    transport.start()
    count = 3 * MAX_BACKLOG
    sender = Sender(in_w, frame(b"7"), count)
    deadline = time.monotonic() + 10
    while not transport.paused and time.monotonic() < deadline:  # the loop is busy: blocked
        time.sleep(0.001)
    assert transport.paused and transport.backlog == MAX_BACKLOG + 1 and handled == []
    await wait_until(lambda: sender.done.is_set() and len(handled) == count)
    assert handled == [7] * count and transport.backlog == 0
    transport.close()


async def test_messages_kept_elsewhere_count_until_released():
    loop = asyncio.get_running_loop()
    in_r, in_w = os.pipe()
    kept = []

    def keep(message):
        kept.append(message)
        transport.hold(1)

    transport = StdioTransport(FdReader(in_r), open(os.devnull, "wb"), loop, keep,
                               lambda why: None, pressure=Pressure())
    transport.start()
    sender = Sender(in_w, frame(b"1"), 2 * MAX_BACKLOG)
    await wait_until(lambda: transport.paused)
    assert len(kept) == MAX_BACKLOG + 1 and transport.backlog == MAX_BACKLOG + 1
    transport.hold(-len(kept))  # handed over: reading goes on
    await wait_until(lambda: sender.done.is_set() and len(kept) == 2 * MAX_BACKLOG)
    transport.close()


class GatedStdout:
    """The daemon's stdout, written one write() at a time when the test lets it: each write
    waits for a `release`, so the bytes still queued for the client step down as the test says."""

    def __init__(self):
        self.writes: list[int] = []
        self._permits = threading.Semaphore(0)

    def write(self, data: bytes) -> int:
        self.writes.append(len(data))
        self._permits.acquire()
        return len(data)

    def flush(self) -> None:
        pass

    def release(self, n: int = 1) -> None:
        for _ in range(n):
            self._permits.release()


def gated(loop, delivered):
    in_r, in_w = os.pipe()
    stdout = GatedStdout()
    transport = StdioTransport(FdReader(in_r), stdout, loop, delivered.append, lambda why: None,
                               pressure=Pressure())
    transport.start()
    return transport, stdout, in_w


async def stays_paused(transport, delivered, count):
    """Long enough for the paused reader to look again (it looks at every write and every
    HANGUP_POLL), it still has not read past message `count`."""
    await asyncio.sleep(3 * HANGUP_POLL)
    assert transport.paused and len(delivered) == count


BIG = MAX_WRITE  # a write of MAX_WRITE bytes is written alone, never batched with the next


async def test_stdin_pauses_above_read_pause_bytes_and_resumes_at_read_resume():
    loop = asyncio.get_running_loop()
    for last, resumes in ((BIG + 1, False), (BIG, True)):
        # queued for the client: 3 * BIG, then `last`, then BIG; 1 MiB and more in all
        delivered = []
        transport, stdout, in_w = gated(loop, delivered)
        for size in (BIG, BIG, BIG, last, BIG):
            transport.write(b"x" * size)
        assert transport.buffered == 4 * BIG + last > READ_PAUSE
        os.write(in_w, frame(b"1") + frame(b"2"))
        await wait_until(lambda: transport.paused)
        assert delivered == [1] and transport.pauses == 1

        stdout.release(2)  # READ_PAUSE + (last - BIG), then READ_RESUME + BIG + (last - BIG)
        await wait_until(lambda: transport.buffered == 2 * BIG + last)
        await stays_paused(transport, delivered, 1)
        stdout.release()
        await wait_until(lambda: transport.buffered == BIG + last)
        if resumes:  # exactly READ_RESUME left: reading goes on
            assert transport.buffered == READ_RESUME
            await wait_until(lambda: delivered == [1, 2])
        else:  # one byte more: still paused, until the client takes the next write
            assert transport.buffered == READ_RESUME + 1
            await stays_paused(transport, delivered, 1)
            stdout.release()
            await wait_until(lambda: delivered == [1, 2])
        assert not transport.paused and transport.pauses == 1
        stdout.release(10)
        transport.close(timeout=5)
        os.close(in_w)


async def test_stdin_is_read_at_read_pause_bytes_and_not_one_byte_above():
    loop = asyncio.get_running_loop()
    delivered = []
    transport, stdout, in_w = gated(loop, delivered)
    for _ in range(4):
        transport.write(b"x" * BIG)
    assert transport.buffered == READ_PAUSE
    os.write(in_w, frame(b"1") + frame(b"2"))
    await wait_until(lambda: delivered == [1, 2])
    assert not transport.paused and transport.pauses == 0
    transport.write(b"x")
    os.write(in_w, frame(b"3") + frame(b"4"))
    await wait_until(lambda: transport.paused)
    assert delivered == [1, 2, 3] and transport.pauses == 1
    stdout.release(10)
    transport.close(timeout=5)
    os.close(in_w)


async def test_a_reader_paused_for_its_backlog_resumes_at_half_of_it():
    loop = asyncio.get_running_loop()
    in_r, in_w = os.pipe()
    kept = []

    def keep(message):
        kept.append(message)
        transport.hold(1)

    transport = StdioTransport(FdReader(in_r), open(os.devnull, "wb"), loop, keep,
                               lambda why: None, pressure=Pressure())
    transport.start()
    sender = Sender(in_w, frame(b"1"), 2 * MAX_BACKLOG, close=False)  # open: no hang-up
    await wait_until(lambda: transport.paused)
    assert len(kept) == MAX_BACKLOG + 1
    transport.hold(-(MAX_BACKLOG // 2))  # MAX_BACKLOG // 2 + 1 still wait
    await stays_paused(transport, kept, MAX_BACKLOG + 1)
    transport.hold(-1)  # half of MAX_BACKLOG: reading goes on, up to the limit again
    await wait_until(lambda: transport.backlog == MAX_BACKLOG + 1)
    await stays_paused(transport, kept, MAX_BACKLOG + 1 + MAX_BACKLOG // 2 + 1)
    assert transport.pauses == 0  # it paused for the backlog, never for the bytes
    transport.hold(-len(kept))
    await wait_until(lambda: sender.done.is_set() and len(kept) == 2 * MAX_BACKLOG)
    transport.close()
    os.close(in_w)
