"""The daemon: a pygls LanguageServer holding the sessions, wired to stdio.

However the daemon is told to stop — `exit`, stdin closing, SIGINT or SIGTERM — it stops the
same way, within a deadline: new requests are refused, every running turn is cancelled through
the normal cancel path (each `turn/start` resolves `cancelled`, each tool call gets its
`toolCallFinished`, transcripts are written), the answers still in flight are sent, then tool
process groups still registered with the reaper are killed. A second signal while that runs
kills the tool process groups and exits at once.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from typing import Any

import anyio
from pygls.lsp.server import LanguageServer

import heddle
from heddle import secret_env
from heddle.core.stream import ModelCaller
from heddle.envvars import number
from heddle.model.anthropic_client import AnthropicModel
from heddle.processes.reaper import REAPER
from heddle.rpc import diagnostics, documents, handlers, permissions
from heddle.rpc.boot import Boot, heddle_capabilities
from heddle.rpc.errorlog import REQUEST_ERRORS
from heddle.rpc.protocol import HeddleProtocol
from heddle.rpc.pygls_adapter import converter
from heddle.rpc.transport import StdioTransport
from heddle.sessions.retention import DEFAULT_DAYS, prune_tool_results, tool_results_dir
from heddle.sessions.session import SessionOptions, SessionRegistry
from heddle.settings import LoadedSettings
from heddle.sessions.setup import from_env
from heddle.sessions.transcript import sessions_dir

log = logging.getLogger(__name__)

SHUTDOWN_GRACE = 5.0
"""Seconds a stopping daemon gives its turns to end and its answers to go out."""
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class HeddleServer(LanguageServer):
    protocol: HeddleProtocol

    def __init__(self, env: dict[str, str] | None = None):
        super().__init__("heddle", heddle.__version__, protocol_cls=HeddleProtocol,
                         converter_factory=converter)
        env = secret_env.environ() if env is None else dict(env)  # the held API key included
        setup = from_env(env)  # what the ACP door's turns run with too
        self.setup = setup
        self.default_model = setup.default_model
        self.permission_timeout = setup.permission_timeout
        self.apply_edit_timeout = setup.edit_timeout
        self.tool_results_days = number(env, "HEDDLE_TOOL_RESULTS_DAYS", DEFAULT_DAYS)
        self.state_sessions = sessions_dir(env)
        self.sessions = SessionRegistry(None if env.get("HEDDLE_NO_TRANSCRIPTS")
                                        else self.state_sessions)
        self.model = setup.model
        self.turn_deps = setup.deps
        self.tools = self.turn_deps.tools
        self._stop = asyncio.Event()
        self.exit_code = 0
        self.stopping = False
        """Set once the daemon is on its way out: new requests are refused from then on."""
        self._signalled: signal.Signals | None = None
        self._background: set[asyncio.Task] = set()
        self.requests_running: set[asyncio.Task] = set()
        """Handlers of requests not yet answered (a stopping daemon lets them answer)."""
        for area in (handlers, documents, permissions, diagnostics):
            area.register(self)

    # -- state --------------------------------------------------------------------------------
    def model_for(self, model: str) -> ModelCaller:
        """One model caller (one HTTP connection pool) per daemon; the model id is per request."""
        return self.turn_deps.model_for(model)

    def session_options(self) -> SessionOptions:
        return self.setup.options

    def defaults_for(self, settings: LoadedSettings) -> SessionOptions:
        return self.setup.defaults_for(settings)

    def heddle_capabilities(self) -> dict[str, Any]:
        return heddle_capabilities(list(self.tools))

    @property
    def client_answers_permissions(self) -> bool:
        return bool(self.protocol.client_heddle_capabilities.get("permissionRequests"))

    def cancel_turn_for_request(self, request_id: Any) -> bool:
        for turn in self.sessions.running_turns():
            if turn.request_id == request_id:
                log.info("cancelling turn %s ($/cancelRequest)", turn.id)
                turn.cancel()
                return True
        return False

    async def cancel_all_turns(self) -> None:
        turns = self.sessions.running_turns()
        for turn in turns:
            turn.cancel()
        with anyio.move_on_after(SHUTDOWN_GRACE):
            for turn in turns:
                await turn.done.wait()

    def spawn(self, coro) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def tidy_up(self) -> None:
        """Remove saved tool results of long-idle sessions, on a worker thread."""
        root, days = tool_results_dir(self.state_sessions), self.tool_results_days
        self.spawn(anyio.to_thread.run_sync(prune_tool_results, root, days))

    def warm_up(self) -> None:
        """Load the model SDK and build its client in worker threads while the editor starts
        up, so the first turn waits for neither (about 2 s of CPU here)."""
        model = self.model_for(self.default_model)
        if isinstance(model, AnthropicModel):
            self.spawn(model.warm_up())  # never raises: the first turn reports any failure

    # -- lifecycle ----------------------------------------------------------------------------
    def report_server_error(self, error: Exception, source: Any) -> None:
        REQUEST_ERRORS.report(getattr(source, "__name__", str(source)), error)

    def request_stop(self, code: int) -> None:
        self.exit_code = code
        self.stopping = True
        self._stop.set()

    def _on_signal(self, sig: signal.Signals) -> None:
        """SIGINT or SIGTERM: stop as for `exit` (exit code 128 + the signal's number); a second
        one while stopping: kill the tool process groups and exit now."""
        if self._signalled is not None:
            log.warning("%s while stopping: killing tool processes and exiting now", sig.name)
            REAPER.kill_all()
            logging.shutdown()
            os._exit(128 + sig)
        self._signalled = sig
        log.warning("%s: cancelling %d running turns, then exiting", sig.name,
                    len(self.sessions.running_turns()))
        self.request_stop(128 + sig)

    def _on_close(self, why: str) -> None:
        log.info("%s; stopping", why)
        self.request_stop(0 if self.protocol.shutdown_received else 1)

    def _catch_signals(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in STOP_SIGNALS:
            try:
                loop.add_signal_handler(sig, self._on_signal, sig)
            except (ValueError, RuntimeError) as exc:  # not the main thread (an embedded server)
                log.info("cannot handle %s: %s", sig.name, exc)

    async def _wind_down(self) -> None:
        """Cancel every turn and let the requests in flight answer, within SHUTDOWN_GRACE."""
        with anyio.move_on_after(SHUTDOWN_GRACE) as scope:
            await self.cancel_all_turns()
            while self.requests_running or self.protocol.unanswered:
                # A queued prompt starts a turn of its own when the turn it waited for ends:
                # look again now and then. An answer goes out in its handler's done callback,
                # which runs before this wait returns.
                if self.requests_running:
                    await asyncio.wait(list(self.requests_running), timeout=0.1,
                                       return_when=asyncio.FIRST_COMPLETED)
                else:  # handed to pygls just before `exit` (all at once): not started yet
                    with anyio.move_on_after(0.1):
                        await self.protocol.all_answered.wait()
                await self.cancel_all_turns()
        if scope.cancelled_caught:
            open_requests = max(len(self.requests_running), len(self.protocol.unanswered))
            if open_requests:
                log.warning("stopping: %d request%s did not finish within %g s", open_requests,
                            "" if open_requests == 1 else "s", SHUTDOWN_GRACE)
            else:
                log.warning("stopping: the turns did not end within %g s", SHUTDOWN_GRACE)

    async def serve(self, transport: StdioTransport, boot: Boot) -> int:
        """Serve on a started transport, taking over from `boot` what arrived while loading."""
        self.protocol.set_writer(transport)
        if boot.early is not None:
            self.protocol.answered_early(boot.early)
        boot.hand_over(self.protocol.handle_raw, self._on_close)
        self._catch_signals()
        self.warm_up()
        self.tidy_up()
        await self._stop.wait()
        await self._wind_down()
        await self.sessions.stop_servers()  # MCP servers: each group killed, reaped
        transport.close()
        REAPER.close()  # kills what a turn that did not end in time left running
        for task in list(self._background):
            task.cancel()
        log.info("exiting with code %d%s", self.exit_code,
                 f" ({self._signalled.name})" if self._signalled else "")
        return self.exit_code

