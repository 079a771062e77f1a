"""ScriptedServer: an HTTP server that answers the Anthropic Messages API from scenarios.

The request's `model` names the scenario. Each request is validated like the real API,
recorded with its prompt-cache accounting, and answered by the scenario's next step (see
docs/scripted-model.md). State shared with other threads (scenarios, cursors, recordings) sits
behind one lock; the prompt cache has its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from .cache import CacheAccount, PromptCache, uncached
from .context_edits import check_context_management, prepare
from .events import render
from .prompt import Prompt, build_prompt
from .respond import (Cursor, StepReply, advance, default_message, fault_headers, planned_status,
                      send_error, send_json, send_step)
from .scenario import (Scenario, ScenarioError, Step, ThinkingBlock, error_type_for,
                       load_scenario, parse_scenario)
from .validate import check_request, last_user_text
from .wire import MAX_HEAD, HttpError, Request, read_request

__all__ = ["RecordedRequest", "ScriptedServer"]

log = logging.getLogger("heddle.scripted")

IDLE_TIMEOUT = 300.0  # a keep-alive connection with no request for this long is closed
BODY_TIMEOUT = 30.0
STOP_TIMEOUT = 5.0


@dataclass(frozen=True)
class RecordedRequest:
    """One request as received. `status` is the HTTP status sent (0: closed before any).

    `cache`: what the request read from and wrote to the prompt cache (None when it was not
    answered with a message); `context_management`: the response's field of that name.
    """

    scenario: str | None
    step_index: int | None
    body: Any
    headers: dict[str, str]
    status: int
    at: float
    path: str = "/v1/messages"
    cache: CacheAccount | None = None
    context_management: dict[str, Any] | None = None


@dataclass(frozen=True)
class _Checked:
    """A valid request, as the model sees it after context edits."""

    name: str
    sent: dict[str, Any]  # as received, for the record
    body: dict[str, Any]  # as the model sees it
    betas: frozenset[str]
    prompt: Prompt
    context_management: dict[str, Any] | None


class ScriptedServer:
    def __init__(self, scenarios: Mapping[str, Scenario | dict[str, Any]] | None = None, *,
                 host: str = "127.0.0.1", port: int = 0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """`clock` (seconds) times the prompt cache's lifetimes; tests pass a ManualClock."""
        self._host = host
        self._requested_port = port
        self._port: int | None = None
        self._lock = threading.Lock()
        self._scenarios: dict[str, Scenario] = {}
        self._cursors: dict[str, Cursor] = {}
        self._requests: list[RecordedRequest] = []
        self._ids = itertools.count(1)
        self._tool_ids = itertools.count(1)
        self._cache = PromptCache(clock)
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        for name, scenario in (scenarios or {}).items():
            self.add_scenario(name, scenario)

    # -- scenarios and recordings (any thread) --

    def add_scenario(self, name: str, scenario: Scenario | dict[str, Any]) -> None:
        parsed = parse_scenario(scenario, source=f"scenario {name!r}")
        with self._lock:
            self._scenarios[name] = parsed
            self._cursors[name] = Cursor()

    def load_dir(self, path: str | Path) -> list[str]:
        """Add every *.json in a directory, named by file stem; returns the names."""
        if not Path(path).is_dir():
            raise ScenarioError(f"not a directory: {path}")
        names = []
        for file in sorted(Path(path).glob("*.json")):
            self.add_scenario(file.stem, load_scenario(file))
            names.append(file.stem)
        return names

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def requests_for(self, name: str) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self._requests if r.scenario == name]

    def clear_cache(self) -> None:
        """Forget every prompt-cache entry (the real API has no such call)."""
        self._cache.clear()

    def cursor(self, name: str) -> int:
        """Index of the step the scenario's next request gets."""
        with self._lock:
            scenario, cursor = self._scenarios[name], self._cursors[name]
        return cursor.step % len(scenario.steps) if scenario.repeat else cursor.step

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the scripted server is not running")
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}"

    # -- lifecycle --

    async def start(self) -> None:
        if self._server is not None:
            raise RuntimeError("the scripted server is already running")
        self._server = await asyncio.start_server(
            self._connection, self._host, self._requested_port, limit=MAX_HEAD)
        self._port = self._server.sockets[0].getsockname()[1]
        log.info("listening on %s", self.url)

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        tasks = list(self._connections)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=STOP_TIMEOUT)
        self._port = None

    async def __aenter__(self) -> ScriptedServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @contextlib.contextmanager
    def run_in_thread(self, timeout: float = 10.0) -> Iterator[ScriptedServer]:
        """Serve from a daemon thread with its own event loop until the block exits."""
        ready = threading.Event()
        failure: list[BaseException] = []
        loop = asyncio.new_event_loop()
        stopping = asyncio.Event()

        async def serve() -> None:
            try:
                await self.start()
            except BaseException as exc:
                failure.append(exc)
                raise
            finally:
                ready.set()
            try:
                await stopping.wait()
            finally:
                await self.stop()

        def main() -> None:
            try:
                loop.run_until_complete(serve())
            except BaseException:
                if not failure:  # a failed start is raised to the caller instead
                    log.exception("the scripted server thread failed")
            finally:
                loop.close()

        thread = threading.Thread(target=main, name="heddle-scripted", daemon=True)
        thread.start()
        if not ready.wait(timeout):
            raise TimeoutError("the scripted server did not start in time")
        if failure:
            raise failure[0]
        try:
            yield self
        finally:
            if not loop.is_closed():
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                    loop.call_soon_threadsafe(stopping.set)
            thread.join(timeout)

    # -- connections --

    async def _connection(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            while await self._serve_one(reader, writer):
                pass
        except (ConnectionError, OSError):
            pass  # the client went away; nothing to answer
        except asyncio.CancelledError:
            # Only stop() cancels these tasks. Ending normally matters: asyncio 3.11 reports a
            # cancelled client_connected_cb task as an "unhandled exception".
            pass
        except Exception:
            log.exception("scripted server failed while answering a request")
        finally:
            self._connections.discard(task)
            writer.close()

    async def _serve_one(self, reader: asyncio.StreamReader,
                         writer: asyncio.StreamWriter) -> bool:
        try:
            request = await read_request(reader, writer, idle_timeout=IDLE_TIMEOUT,
                                         body_timeout=BODY_TIMEOUT)
        except HttpError as exc:
            self._record(None, None, None, {}, exc.status, "")
            await send_error(writer, exc.status, exc.message, request_id=self._request_id(),
                             keep_alive=False)
            return False
        if request is None:
            return False
        return await self._route(request, reader, writer) and request.keep_alive

    def _request_id(self) -> str:
        return f"req_scripted_{next(self._ids)}"

    def _record(self, scenario: str | None, step: int | None, body: Any,
                headers: dict[str, str], status: int, path: str,
                cache: CacheAccount | None = None,
                context_management: dict[str, Any] | None = None) -> None:
        log.info("%s model=%s step=%s -> %s", path or "?", scenario, step, status)
        with self._lock:
            self._requests.append(RecordedRequest(scenario, step, body, headers, status,
                                                  time.monotonic(), path, cache,
                                                  context_management))

    async def _models(self, request: Request, request_id: str,
                      writer: asyncio.StreamWriter) -> bool:
        """`GET /v1/models`: the scenarios, as the models this endpoint serves, in one page."""
        with self._lock:
            names = sorted(self._scenarios)
        self._record(None, None, None, request.headers, 200, request.path)
        models = [{"type": "model", "id": name, "display_name": name,
                   "created_at": "2025-01-01T00:00:00Z"} for name in names]
        return await send_json(writer, 200, {
            "data": models, "has_more": False, "first_id": names[0] if names else None,
            "last_id": names[-1] if names else None}, request_id=request_id,
            keep_alive=request.keep_alive)

    async def _route(self, request: Request, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> bool:
        known = request.path in ("/v1/messages", "/v1/messages/count_tokens")
        request_id = self._request_id()
        keep = request.keep_alive
        if request.path == "/v1/models" and request.method == "GET":
            return await self._models(request, request_id, writer)

        async def reject(status: int, message: str, scenario: str | None = None,
                         step: int | None = None, body: Any = None) -> bool:
            self._record(scenario, step, body, request.headers, status, request.path)
            return await send_error(writer, status, message, request_id=request_id,
                                    keep_alive=keep)

        if not known or request.method != "POST":
            return await reject(404, f"{request.method} {request.path} not found")
        try:
            body = msgspec.json.decode(request.body)
        except msgspec.DecodeError:
            return await reject(400, "There was an error parsing the body of the request: "
                                     "it is not valid JSON.")
        name = body.get("model") if isinstance(body, dict) else None
        name = name if isinstance(name, str) else None
        counting = request.path.endswith("count_tokens")
        betas = frozenset(b.strip() for b in request.headers.get("anthropic-beta", "").split(",")
                          if b.strip())
        error = (check_request(body, counting=counting)
                 or check_context_management(body, betas))
        if error is not None:
            return await reject(400, error, name, None, body)
        with self._lock:
            scenario = self._scenarios.get(name)
        if scenario is None:
            return await reject(404, f"model: {name}", name, None, body)
        model = scenario.model
        error = (model.output_error(body["max_tokens"], betas) if model and not counting
                 else None) or (model.thinking_error(body) if model else None)
        if error is not None:
            return await reject(400, error, name, None, body)
        checked = _check(name, body, betas)
        input_tokens = checked.prompt.tokens
        if input_tokens > scenario.window(betas):
            return await reject(400, _too_long(input_tokens, scenario, betas), name, None, body)
        if counting:
            self._record(name, None, body, request.headers, 200, request.path)
            answer: dict[str, Any] = {"input_tokens": input_tokens}
            if "context_management" in body:
                answer["context_management"] = {
                    "original_input_tokens": build_prompt(body).tokens}
            return await send_json(writer, 200, answer, request_id=request_id, keep_alive=keep)
        return await self._answer(request, request_id, checked, reader, writer)

    async def _answer(self, request: Request, request_id: str, checked: _Checked,
                      reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Answer a valid /v1/messages request with the scenario's next step."""
        keep = request.keep_alive
        name, body, sent = checked.name, checked.body, checked.sent
        last_user = last_user_text(sent["messages"])
        with self._lock:
            scenario = self._scenarios[name]  # add_scenario may have replaced it meanwhile
            index, step, self._cursors[name] = advance(name, scenario, self._cursors[name],
                                                       last_user)
        if not isinstance(step, Step):
            self._record(name, index, sent, request.headers, 400, request.path)
            return await send_error(writer, 400, step, request_id=request_id, keep_alive=keep)
        fault = step.fault
        if fault and fault.status is not None:
            message = (_too_long(checked.prompt.tokens, scenario, checked.betas)
                       if fault.prompt_too_long else fault.message)
            self._record(name, index, sent, request.headers, fault.status, request.path)
            return await send_error(
                writer, fault.status, message or default_message(error_type_for(fault.status)),
                request_id=request_id, keep_alive=keep, headers=fault_headers(fault))

        stream = bool(body.get("stream"))
        status = planned_status(fault, stream)
        # The cache is read and written once a response begins; a request answered with an
        # error status or a closed connection leaves it as it was.
        answered = status == 200
        account = (self._cache.account(checked.prompt, model=scenario.cache_model,
                                       minimum=scenario.cache_minimum) if answered
                   else uncached(checked.prompt.tokens, scenario.cache_minimum))
        self._record(name, index, sent, request.headers, status, request.path,
                     account if answered else None, checked.context_management)
        if scenario.model is not None and scenario.model.omits_thinking and (
                (body.get("thinking") or {}).get("display") != "summarized"):
            step = msgspec.structs.replace(step, content=tuple(
                msgspec.structs.replace(b, thinking="") if isinstance(b, ThinkingBlock) else b
                for b in step.content))
        rendered = render(step, max_tokens=body["max_tokens"], new_tool_id=self._new_tool_id)
        reply = StepReply(step, rendered, stream, name, account.usage(),
                          f"msg_scripted_{next(self._ids)}", request_id,
                          checked.context_management)
        return await send_step(reader, writer, reply, keep)

    def _new_tool_id(self) -> str:
        return f"toolu_{next(self._tool_ids)}"


def _check(name: str, body: dict[str, Any], betas: frozenset[str]) -> _Checked:
    """Apply the request's context edits and build the prompt the model and the cache see."""
    edited, context = prepare(body)
    return _Checked(name, body, edited, betas, build_prompt(edited), context)


def _too_long(tokens: int, scenario: Scenario, betas: frozenset[str]) -> str:
    return f"prompt is too long: {tokens} tokens > {scenario.window(betas)} maximum"
