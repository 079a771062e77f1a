"""A daemon over raw stdio that can be killed like a crash would, and checks of a replay."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections import defaultdict
from pathlib import Path

from heddle.client import Connection


class Daemon:
    """A daemon over raw stdio, so it can be killed like a crash would."""

    def __init__(self, env: dict[str, str]):
        self.env = env
        self.events: list[dict] = []
        self.permission_asked = asyncio.Event()
        self.answer: asyncio.Future | None = None
        """What permission requests get; None: allowOnce."""

    async def start(self) -> Daemon:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-I", "-m", "heddle", "serve", env=self.env,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL)
        self.conn = Connection(self.proc.stdout, self.proc.stdin)
        self.conn.on_notification("turn/event", self.events.append)

        async def on_permission(params):
            self.permission_asked.set()
            return await self.answer if self.answer else {"decision": "allowOnce"}
        self.conn.on_request("permission/request", on_permission)
        await self.call("initialize", {"processId": None, "rootUri": None, "capabilities": {
            "experimental": {"heddle": {"permissionRequests": True}}}})
        self.conn.notify("initialized", {})
        return self

    async def call(self, method: str, params=None, timeout: float = 30):
        return await asyncio.wait_for(self.conn.request(method, params), timeout)

    def kinds(self) -> list[str]:
        return [e["event"]["kind"] for e in self.events]

    async def wait_for(self, kind: str, count: int = 1, timeout: float = 30) -> None:
        # 30 s, as lsp's wait_for_event: a fresh daemon's first model call waits for the SDK's
        # import, 7-16 s on a machine loaded twice over
        async def poll():
            while self.kinds().count(kind) < count:
                await asyncio.sleep(0.01)
        await asyncio.wait_for(poll(), timeout)

    async def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        await self.proc.wait()

    async def stop(self) -> None:
        if self.proc.returncode is None:
            try:
                await self.call("shutdown", timeout=10)
                self.conn.notify("exit")
                await asyncio.wait_for(self.proc.wait(), 10)
            finally:
                if self.proc.returncode is None:
                    self.proc.kill()
                    await self.proc.wait()


def transcript_path(daemon_env: dict[str, str], session_id: str) -> Path:
    return Path(daemon_env["XDG_STATE_HOME"]) / "heddle" / "sessions" / f"{session_id}.jsonl"


SLEEPER = "echo $$ > sleeper.pid; exec sleep 30"
"""A Bash command that runs until stopped, and says which process group to stop."""


def reap_sleeper(workspace: Path) -> None:
    """Stop what SLEEPER started, if a killed daemon left it running."""
    pid_file = workspace / "sleeper.pid"
    if pid_file.exists():
        try:
            os.killpg(int(pid_file.read_text()), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


async def after(d: Daemon, kind: str, count: int = 1, pause: float = 0.2) -> None:
    """Once `d` has sent `count` events of `kind`, and `pause` seconds more."""
    await d.wait_for(kind, count)
    await asyncio.sleep(pause)


async def file_appears(path: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text().strip()):
        assert time.monotonic() < deadline, f"{path} never appeared"
        await asyncio.sleep(0.02)


def turns_of(events: list[dict]) -> dict[str, list[dict]]:
    """The events of each turn, in the order they came."""
    turns: dict[str, list[dict]] = defaultdict(list)
    for e in events:
        turns[e["turnId"]].append(e)
    return dict(turns)


def replay_problems(events: list[dict], permissions: bool = True) -> list[str]:
    """What a replay breaks of the spec: each turn numbered from seq 0 and contiguous, starting
    with turnStarted and ending with turnEnded; every toolCallStarted (a sub-agent's too) has
    its toolCallFinished; every permissionAsked its permissionAnswered (unless not
    `permissions`)."""
    problems = []
    for turn_id, turn in turns_of(events).items():
        kinds = [e["event"]["kind"] for e in turn]
        if [e["seq"] for e in turn] != list(range(len(turn))):
            problems.append(f"{turn_id}: seq {[e['seq'] for e in turn]}")
        if kinds[0] != "turnStarted" or kinds[-1] != "turnEnded":
            problems.append(f"{turn_id}: starts with {kinds[0]}, ends with {kinds[-1]}")
        opened: dict[tuple, str] = {}
        for e in turn:
            ev, under = e["event"], None
            if ev["kind"] == "agent":
                ev, under = ev["event"], ev["toolCallId"]
            key = (under, ev.get("toolCallId"))
            if ev["kind"] == "toolCallStarted" or (permissions and ev["kind"] == "permissionAsked"):
                opened[(ev["kind"],) + key] = ev.get("tool", "")
            elif ev["kind"] == "toolCallFinished":
                opened.pop(("toolCallStarted",) + key, None)
            elif ev["kind"] == "permissionAnswered":
                opened.pop(("permissionAsked",) + key, None)
        problems += [f"{turn_id}: {kind} {call} never closed" for kind, _, call in opened]
    return problems


def shown_text(events: list[dict]) -> str:
    return "".join(e["event"]["text"] for e in events if e["event"]["kind"] == "textDelta")


def assistant_text(messages: list[dict]) -> str:
    return "".join(b["text"] for m in messages if m["role"] == "assistant"
                   for b in m["content"] if b["type"] == "text")
