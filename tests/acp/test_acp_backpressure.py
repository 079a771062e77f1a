"""Back-pressure on the ACP door's stdin, over real pipes: a client that sends requests and
reads no answers is not read beyond a bound, gets every answer once it reads, and an agent
that stopped reading still stops when the client closes its stdin."""

from __future__ import annotations

import fcntl
import os
import subprocess
import termios
import threading
import time

from acp_harness import AGENT

REQUEST = b'{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":1}}\n'
COUNT = 30_000
"""Requests sent: about 2.4 MB, whose answers (about 15 MB) are far more than the agent keeps."""
BOUND = 600_000
"""Most bytes of requests the agent reads from a client that reads nothing: those whose answers
fill READ_PAUSE (1 MiB of answers of about 500 bytes) and the stdout pipe, MAX_BACKLOG (1,000)
unanswered, a 64 KiB chunk past the mark: about 400 KB."""
STILL = 1.0
"""Seconds the pipe must stay full for the agent to count as not reading."""


def in_pipe(fd: int) -> int:
    """Bytes written to the pipe and not read from it yet."""
    return int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"), "little")


class Flood:
    """The client's end of the agent's stdin: non-blocking writes of COUNT requests."""

    def __init__(self, fd: int):
        self.fd = fd
        os.set_blocking(fd, False)
        self.data = b"".join(REQUEST % i for i in range(COUNT))
        self.written = 0

    def until_refused(self, deadline: float) -> bool:
        """Write until the agent has taken nothing for STILL seconds (True) or all is written
        (False)."""
        refused_since = None
        while self.written < len(self.data):
            assert time.monotonic() < deadline, "the agent neither read nor stopped reading"
            try:
                self.written += os.write(self.fd, self.data[self.written:self.written + 65536])
                refused_since = None
            except BlockingIOError:
                refused_since = refused_since or time.monotonic()
                if time.monotonic() - refused_since >= STILL:
                    return True
                time.sleep(0.01)
        return False

    def taken(self) -> int:
        """Bytes the agent has read."""
        return self.written - in_pipe(self.fd)


def start(env, cwd, log):
    return subprocess.Popen(AGENT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=log, env=env, cwd=cwd)


def reap(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)


def test_a_client_that_reads_no_answers_is_not_read_until_it_reads(daemon_env, workspace,
                                                                     tmp_path):
    log = open(tmp_path / "agent.log", "wb")
    proc = start(daemon_env, workspace, log)
    try:
        flood = Flood(proc.stdin.fileno())
        assert flood.until_refused(time.monotonic() + 40), "every request was read"
        assert flood.taken() < BOUND, (flood.taken(), len(flood.data))

        lines: list[bytes] = []
        reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
        reader.start()  # the client reads: the rest is read, and everything answered
        os.set_blocking(flood.fd, True)
        os.write(flood.fd, flood.data[flood.written:])
        proc.stdin.close()
        reader.join(50)
        assert not reader.is_alive()
        assert proc.wait(10) == 0
    finally:
        reap(proc)
        log.close()
    ids = sorted(int(line.split(b'"id":')[1].split(b",")[0]) for line in lines)
    assert ids == list(range(COUNT))


def test_stdin_closing_while_it_is_not_read_stops_the_agent(daemon_env, workspace, tmp_path):
    log_path = tmp_path / "agent.log"
    log = open(log_path, "wb")
    proc = start(daemon_env, workspace, log)
    try:
        flood = Flood(proc.stdin.fileno())
        assert flood.until_refused(time.monotonic() + 40), "every request was read"
        proc.stdin.close()  # the client is gone; its end of stdout stays open, never read
        code = proc.wait(30)
    finally:
        reap(proc)
        log.close()
    assert code == 0
    text = log_path.read_text()
    assert "stdin closed while it was not read" in text
