"""The real daemon (`python -I -m heddle serve`) over real stdio, and a lean client for it.

The client frames and parses JSON-RPC itself and dates every message when its last byte is
read, so what it measures is the daemon plus the pipe. It can stop reading, or read at a fixed
rate, to play an editor that falls behind.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

from heddle.frames import Decoder, FrameError, encode


_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode


class DaemonError(Exception):
    pass


def daemon_env(model_url: str, state_dir: Path, extra: dict[str, str] | None = None
               ) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "HEDDLE_"))}
    env.update(ANTHROPIC_BASE_URL=model_url, ANTHROPIC_API_KEY="bench",
               XDG_STATE_HOME=str(state_dir), HEDDLE_LOG_FILE=str(state_dir / "heddle.log"))
    env.update(extra or {})
    return env


def without_repeat_guard(state_dir: Path) -> dict[str, str]:
    """Environment for a daemon whose scripted model repeats a call on purpose (a long session
    of the same read): user settings of its own that turn the repeat guard off."""
    config = state_dir / "config"
    (config / "heddle").mkdir(parents=True, exist_ok=True)
    (config / "heddle" / "settings.toml").write_text("[loop]\nwarn_at = 0\nstop_at = 0\n")
    return {"XDG_CONFIG_HOME": str(config)}


def memory(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak RSS) of a process, in bytes; {} once it is gone."""
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith((b"VmRSS:", b"VmHWM:")):
                    key, value = line.split(b":", 1)
                    out[key.decode()] = int(value.split()[0]) * 1024
    except OSError:
        pass
    return out


_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used (all its threads); 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


class Event:
    __slots__ = ("at", "turn", "seq", "kind", "params")

    def __init__(self, at: float, params: dict[str, Any]):
        self.at = at
        self.params = params
        self.turn = params.get("turnId")
        self.seq = params.get("seq")
        self.kind = params.get("event", {}).get("kind")


class Daemon:
    """One daemon process and the client end of its stdio."""

    def __init__(self, proc: asyncio.subprocess.Process, spawned_at: float):
        self.proc = proc
        self.pid = proc.pid
        self.spawned_at = spawned_at
        self.events: list[Event] = []
        self.notifications = 0
        self.bytes_read = 0
        self._ids = itertools.count(1)
        self._pending: dict[Any, asyncio.Future] = {}
        self._reading = asyncio.Event()
        self._reading.set()
        self._rate: float | None = None
        self._closed = asyncio.Event()
        self._reader = asyncio.ensure_future(self._read_loop())

    @classmethod
    async def spawn(cls, env: dict[str, str], cwd: Path, stderr_path: Path) -> Daemon:
        stderr = open(stderr_path, "ab")
        try:
            t0 = time.monotonic()
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-I", "-m", "heddle", "serve", stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=stderr, env=env, cwd=str(cwd),
                limit=1 << 16)
        finally:
            stderr.close()
        return cls(proc, t0)

    # -- sending -------------------------------------------------------------------------------
    def _write(self, payload: dict[str, Any]) -> float:
        body = _encode(payload)
        t = time.monotonic()
        self.proc.stdin.write(encode(body))
        return t

    def send_request(self, method: str, params: Any = None) -> tuple[float, asyncio.Future]:
        """Send now; returns when it was sent and a future of (result, when it arrived)."""
        msg_id = next(self._ids)
        future = asyncio.get_running_loop().create_future()
        self._pending[msg_id] = future
        sent = self._write({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return sent, future

    async def request(self, method: str, params: Any = None, timeout: float = 60) -> Any:
        _, future = self.send_request(method, params)
        result, _ = await asyncio.wait_for(future, timeout)
        return result

    def notify(self, method: str, params: Any = None) -> None:
        self._write({"jsonrpc": "2.0", "method": method, "params": params})

    async def initialize(self, initialized: bool = True) -> float:
        """initialize (+ initialized, unless told not to); returns when the result arrived."""
        _, future = self.send_request("initialize", {
            "processId": os.getpid(), "rootUri": None,
            "capabilities": {"experimental": {"heddle": {"permissionRequests": True}}}})
        _, at = await asyncio.wait_for(future, 60)
        if initialized:
            self.notify("initialized", {})
        return at

    async def new_session(self, workspace: Path, model: str,
                          mode: str = "bypassPermissions") -> str:
        """A session whose model is a scripted scenario's name."""
        result = await self.request("session/new", {"workspace": str(workspace),
                                                    "permissionMode": mode, "model": model})
        return result["sessionId"]

    def start_turn(self, session: str, prompt: str) -> tuple[float, asyncio.Future]:
        """turn/start now; returns when it was sent and a future of (result, arrival)."""
        return self.send_request("turn/start", {"sessionId": session, "prompt": prompt})

    async def shutdown(self, timeout: float = 15) -> None:
        self._reading.set()
        self._rate = None
        try:
            _, future = self.send_request("shutdown")
            await asyncio.wait_for(future, timeout)
            self.notify("exit")
            await asyncio.wait_for(self.proc.wait(), timeout)
        except (asyncio.TimeoutError, DaemonError, ConnectionError, OSError):
            pass
        finally:
            if self.proc.returncode is None:
                self.proc.kill()
                await self.proc.wait()
            self._reader.cancel()

    # -- reading -------------------------------------------------------------------------------
    def pause_reading(self) -> None:
        self._reading.clear()

    def resume_reading(self, rate: float | None = None) -> None:
        """Read again: as fast as possible, or `rate` bytes per second."""
        self._rate = rate
        self._reading.set()

    def memory(self) -> dict[str, int]:
        return memory(self.pid)

    def cpu(self) -> float:
        return cpu_seconds(self.pid)

    def turn_events(self, turn: str) -> list[Event]:
        return [e for e in self.events if e.turn == turn]

    async def _read_loop(self) -> None:
        stream = self.proc.stdout
        frames = Decoder()
        try:
            while True:
                if not self._reading.is_set():
                    await self._reading.wait()
                if self._rate:
                    step = max(256, int(self._rate / 100))
                    data = await stream.read(step)
                    await asyncio.sleep(len(data) / self._rate)
                else:
                    data = await stream.read(1 << 16)
                if not data:  # a message cut short here was the daemon's last words
                    return
                now = time.monotonic()
                self.bytes_read += len(data)
                for body in frames.messages(data):
                    self._dispatch(_decode(body), now)
        except FrameError as exc:
            raise DaemonError(f"the daemon's output is not JSON-RPC: {exc}") from None
        except ConnectionError:
            return
        finally:
            self._closed.set()
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(DaemonError("the daemon closed its stdout"))

    def _dispatch(self, message: dict[str, Any], now: float) -> None:
        method = message.get("method")
        if method is None:
            future = self._pending.pop(message.get("id"), None)
            if future is None or future.done():
                return
            if "error" in message:
                err = message["error"]
                future.set_exception(DaemonError(f"{err.get('code')}: {err.get('message')}"))
            else:
                future.set_result((message.get("result"), now))
            return
        self.notifications += 1
        if method == "turn/event":
            self.events.append(Event(now, message["params"]))
        elif "id" in message:  # a request from the daemon: allow whatever it asks
            self._write({"jsonrpc": "2.0", "id": message["id"],
                         "result": {"decision": "allowOnce"}})
