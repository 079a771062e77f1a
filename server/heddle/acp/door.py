"""`heddle acp`: serve the Agent Client Protocol on stdio until the client goes away.

However it is told to stop — stdin closing, SIGINT or SIGTERM — it stops one way, within
SHUTDOWN_GRACE: every running turn is cancelled through the normal cancel path (each prompt
answers `cancelled`, each tool call gets its final status, transcripts are written), then the
sessions' MCP servers are stopped and the tool process groups still registered with the reaper
are killed. A second signal meanwhile
kills them and exits at once.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal

from acp.agent.router import build_agent_router
from acp.connection import Connection

from heddle import secret_env
from heddle.acp.agent import HeddleAgent
from heddle.acp.transport import StdioTransport
from heddle.mcp.servers import STOP_BOUND
from heddle.processes.reaper import REAPER

log = logging.getLogger(__name__)

SHUTDOWN_GRACE = 5.0


def serve_stdio() -> int:
    return asyncio.run(_serve())


async def _serve() -> int:
    transport = await StdioTransport.open()
    agent = HeddleAgent(secret_env.environ(), transport.pressure)
    # unstable: session/resume is there only (session/fork and session/close are not served)
    conn = Connection(build_agent_router(agent, use_unstable_protocol=True), transport,
                      listening=False)
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
    for task in (serving, stopping, warm):
        task.cancel()
    try:
        await asyncio.wait_for(conn.close(), SHUTDOWN_GRACE)
    except (asyncio.TimeoutError, Exception) as exc:
        log.info("closing the connection: %r", exc)
    REAPER.close()
    code = 128 + signalled[0] if signalled else 0
    log.info("exiting with code %d", code)
    return code
