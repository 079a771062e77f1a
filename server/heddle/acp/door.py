"""`heddle acp`: serve the Agent Client Protocol on stdio until the client goes away.

Start-up: the transport starts first (the standard library and msgspec), and a first valid
`initialize` is answered at once (`hello`), while the SDK (its schema module builds pydantic
models for about a second) and the core are imported on a worker thread; what else arrives
meanwhile is kept in order and handed to the SDK's connection when it is ready.

However it is told to stop — stdin closing, SIGINT or SIGTERM — it stops one way, within
SHUTDOWN_GRACE: every running turn is cancelled through the normal cancel path (each prompt
answers `cancelled`, each tool call gets its final status, transcripts are written), then the
sessions' MCP servers are stopped and the tool process groups still registered with the reaper
are killed. A second signal meanwhile
kills them and exits at once.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import signal

from typing import Any

from heddle import secret_env
from heddle.acp import hello
from heddle.acp.transport import StdioTransport
from heddle.rpc.framing import Complaints

log = logging.getLogger(__name__)

SHUTDOWN_GRACE = 5.0


def serve_stdio() -> int:
    try:
        return asyncio.run(_serve())
    except Exception as exc:  # one line on stderr, the traceback in the log file
        log.error("heddle acp stopped: %s", exc, exc_info=True)
        return 1


def _load() -> Any:
    """The SDK and the core (on a worker thread)."""
    from heddle.acp import agent
    for name in ("acp.agent.router", "acp.connection"):
        importlib.import_module(name)
    return agent


class _Inbox:
    """The SDK's transport: the messages read before it was ready first, then the rest."""

    def __init__(self, transport: StdioTransport, held: list, queue: asyncio.Queue):
        self._transport, self._held, self._queue = transport, held, queue

    async def receive(self) -> dict[str, Any] | None:
        return self._held.pop(0) if self._held else await self._queue.get()

    async def send(self, message: dict[str, Any]) -> None:
        await self._transport.send(message)

    async def close(self) -> None:
        await self._transport.close()


def _routed(router: Any, agent: Any, complaints: Complaints,
            refused: tuple[type[Exception], ...]) -> Any:
    """The SDK's router, and what its schema drops from an `initialize` it answered: the
    client capabilities it does not know yet (`session.compaction`). A notification that
    names no method of ours or has invalid params gets no answer (JSON-RPC answers none) and
    one rate-limited warning, not the SDK's logged traceback."""
    async def route(method: str, params: Any, is_notification: bool) -> Any:
        if is_notification:
            try:
                return await router(method, params, is_notification)
            except refused as exc:  # the SDK's RequestError, pydantic's ValidationError
                why = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
                complaints.refused(f"the notification {method[:80]!r}: {why}")
                return None
        result = await router(method, params, is_notification)
        if method == "initialize" and not is_notification and isinstance(params, dict):
            agent.client_compaction = hello.client_compaction(params)
        return result
    return route


async def _pump(transport: StdioTransport, queue: asyncio.Queue) -> None:
    """Hand what stdin brings to the queue, then None: at the end of stdin, or when reading it
    fails (which must end the agent too, not leave it serving no one)."""
    try:
        while True:
            message = await transport.receive()
            await queue.put(message)
            if message is None:
                return
    except Exception as exc:
        log.error("reading stdin failed: %s; stopping", exc, exc_info=True)
        await queue.put(None)


async def _early(queue: asyncio.Queue, loading: asyncio.Future, transport: StdioTransport,
                 env: dict[str, str]) -> tuple[list, dict | None]:
    """Answer a first `initialize` while loading; (messages kept for later, its params)."""
    held: list = []
    params = None
    while not loading.done():
        get = asyncio.ensure_future(queue.get())
        await asyncio.wait({get, loading}, return_when=asyncio.FIRST_COMPLETED)
        if not get.done():
            get.cancel()
            break
        message = get.result()
        if params is None and not held and message is not None and hello.early(message):
            params = message["params"]
            transport.write({"jsonrpc": "2.0", "id": message["id"], "result":
                             hello.initialize_result(env, not env.get("HEDDLE_NO_TRANSCRIPTS"))})
            log.info("initialize answered while loading")
        else:
            held.append(message)
            if message is None:
                break
    return held, params


async def _serve() -> int:
    env = secret_env.environ()
    transport = await StdioTransport.open()
    queue: asyncio.Queue = asyncio.Queue()
    reading = asyncio.ensure_future(_pump(transport, queue))
    loading = asyncio.get_running_loop().run_in_executor(None, _load)
    held, early = await _early(queue, loading, transport, env)
    module = await loading
    from acp.agent.router import build_agent_router
    from acp.connection import Connection
    from acp.exceptions import RequestError
    from pydantic import ValidationError
    from heddle.mcp.servers import STOP_BOUND
    from heddle.processes.reaper import REAPER

    agent = module.HeddleAgent(env, transport.pressure)
    if early is not None:
        agent.client_fs = hello.client_fs(early)
        agent.use_terminal(hello.client_terminal(early))
        agent.client_compaction = hello.client_compaction(early)
    # unstable: session/resume is there only (session/fork and session/close are not served)
    conn = Connection(_routed(build_agent_router(agent, use_unstable_protocol=True), agent,
                              transport.complaints, (RequestError, ValidationError)),
                      _Inbox(transport, held, queue), listening=False)
    agent.request = conn.send_request
    agent.notify = lambda method, params: transport.write(
        {"jsonrpc": "2.0", "method": method, "params": params})
    stop = asyncio.Event()
    signalled: list[signal.Signals] = []

    def on_signal(sig: signal.Signals) -> None:
        if signalled:
            log.warning("%s while stopping: killing tool processes and exiting now", sig.name)
            REAPER.kill_all()
            logging.shutdown()
            os._exit(128 + sig)
        signalled.append(sig)
        log.warning("%s: cancelling running turns, then exiting", sig.name)
        stop.set()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    warm = asyncio.ensure_future(agent.model.warm_up())  # the SDK import, off the first turn
    serving = asyncio.ensure_future(conn.main_loop())
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
    log.info("stopping: %s", "signal" if signalled else "stdin closed")
    try:
        await asyncio.wait_for(agent.cancel_all(), SHUTDOWN_GRACE)
        await asyncio.sleep(0)  # the cancelled prompts' answers go out
    except asyncio.TimeoutError:
        log.warning("stopping: turns did not end within %g s", SHUTDOWN_GRACE)
    try:
        await asyncio.wait_for(agent.sessions.stop_servers(), STOP_BOUND + 1)
    except asyncio.TimeoutError:
        log.warning("stopping: MCP servers did not stop in time")
    for task in (serving, stopping, warm, reading):
        task.cancel()
    try:
        await asyncio.wait_for(conn.close(), SHUTDOWN_GRACE)
    except (asyncio.TimeoutError, Exception) as exc:
        log.info("closing the connection: %r", exc)
    REAPER.close()
    code = 128 + signalled[0] if signalled else 0
    log.info("exiting with code %d", code)
    return code
