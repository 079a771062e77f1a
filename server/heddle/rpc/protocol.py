"""The daemon's JSON-RPC protocol: the lifecycle rules, msgspec encoding, server requests.

pygls does the dispatch; this class fixes what it gets wrong for a long-lived agent daemon:
custom params stay plain dicts (validated by msgspec in the handlers), requests before
`initialize` and after `shutdown` get clear errors, so does a message pygls would take for a
notification or a reply although it carries a method and an id (else it would never be
answered, and a stopping daemon would wait for it), late replies to abandoned server requests
are ignored, `$/cancelRequest` on a turn cancels the turn (which then resolves `cancelled`),
and outgoing messages are encoded by msgspec onto a non-blocking writer. It uses pygls only
through `pygls_adapter` (which owns every override of pygls internals) and its public API.
"""

from __future__ import annotations

import asyncio
import logging
import re
import typing
import uuid
from concurrent.futures import Future
from typing import Any

import anyio
import attrs
import cattrs
import cattrs.v
import msgspec
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException

from heddle_protocol import ErrorCode, Kind
from heddle_protocol import method as method_entry
from heddle.frames import encode
from heddle.rpc.boot import EarlyInitialize, EarlyInitializeParams, initialize_result, valid_id
from heddle.rpc.framing import BadInput
from heddle.rpc.pygls_adapter import PyglsProtocol

log = logging.getLogger(__name__)


def is_notification(method: str) -> bool:
    """`method` is a notification, of LSP's or of Heddle's own table (which takes no id)."""
    lsp_type = lsp.METHOD_TO_TYPES.get(method, (None,))[0]
    if lsp_type is not None:
        return "id" not in {field.name for field in attrs.fields(lsp_type)}
    try:
        return method_entry(method).kind is Kind.NOTIFICATION
    except KeyError:
        return False


def invalid_params_detail(exc: BaseException) -> str:
    """What is wrong with the params of an LSP message pygls could not structure, and where,
    in the wire's names (cattrs says only "While structuring InitializeRequest (1 sub-exception)")."""
    if not isinstance(exc, (cattrs.ClassValidationError, cattrs.IterableValidationError)):
        return str(exc)
    problems = cattrs.transform_error(exc, format_exception=_describe)
    what, _, where = problems[0].rpartition(" @ ")
    where = where.replace("$.params", "$", 1)
    where = re.sub(r"_([a-z])", lambda m: m[1].upper(), where)  # processId, not process_id
    if what == "missing":  # worded as msgspec words it for Heddle's own methods
        where, _, field = where.rpartition(".")
        what = f"Object missing required field `{field}`"
    text = what if where in ("", "$") else f"{what} - at `{where}`"
    return text + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")


_JSON_NAMES = {"NoneType": "null", "Sequence": "array", "list": "array", "tuple": "array",
               "Mapping": "object", "dict": "object", "str": "str", "int": "int",
               "float": "float", "bool": "bool"}


def _describe(exc: BaseException, expected: Any) -> str:
    if isinstance(exc, KeyError):
        return "missing"
    if expected is None:
        return cattrs.v.format_exception(exc, expected)
    names = []
    for t in typing.get_args(expected) if typing.get_origin(expected) is typing.Union \
            else (expected,):
        name = getattr(t, "__name__", repr(t))
        names.append("object" if attrs.has(t) else _JSON_NAMES.get(name, name))
    return f"Expected `{' | '.join(names)}`"


class RpcError(JsonRpcException):
    """A clean JSON-RPC error: code and message, never a traceback."""

    def __init__(self, code: int, message: str):
        super().__init__(message=message, code=int(code), data=None)


_encoder = msgspec.json.Encoder()


class HeddleProtocol(PyglsProtocol):
    def __init__(self, server, converter):
        super().__init__(server, converter)
        self.initialize_seen = False
        self.client_heddle_capabilities: dict[str, Any] = {}
        self._early: EarlyInitialize | None = None
        self._initialize: tuple[Any, dict[str, Any] | None] | None = None
        """(id, result) of the `initialize` being run. The daemon answers it with the result
        of `boot.initialize_result`, the one the early answer gives, whatever pygls computes
        (which is logged if it differs): one answer however fast the server loads."""
        self.shutdown_received = False
        """`shutdown` was handed to pygls: an `exit` after it exits with code 0, even before
        its answer (which goes out before the daemon exits)."""
        self.unanswered: set[Any] = set()
        """Ids of the requests handed to pygls and not answered yet. A stopping daemon waits
        for them: a handler that has not started yet is not in `requests_running`."""
        self.all_answered = asyncio.Event()

    def answered_early(self, early: EarlyInitialize) -> None:
        """`initialize` request `early.id` was answered while the server loaded (see boot.py):
        run it when it comes, but do not answer it again."""
        self._early = early

    # -- incoming -----------------------------------------------------------------------------
    def handle_raw(self, message: object) -> None:
        """Entry point for each decoded message from the transport (on the loop thread)."""
        if isinstance(message, BadInput):  # the transport logged why (rate-limited)
            self.send_raw(message.reply())
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            msg_id = message.get("id") if isinstance(message, dict) else None
            self._send_error(msg_id if valid_id(msg_id) else None, ErrorCode.INVALID_REQUEST,
                             'invalid request: expected a JSON object with "jsonrpc": "2.0"')
            return
        method, msg_id = message.get("method"), message.get("id")
        if not valid_id(msg_id):
            if method is not None and "id" in message:
                self._send_error(None, ErrorCode.INVALID_REQUEST,
                                 "invalid request: id must be a string, a number or null")
            else:
                log.warning("ignoring a message with an invalid id: %.200r", message)
            return
        is_request = method is not None and "id" in message
        if method is not None and not isinstance(method, str):
            self._send_error(msg_id, ErrorCode.INVALID_REQUEST, "invalid request: method must be a string")
            return
        if method == lsp.EXIT:
            self.server.request_stop(0 if self.shutdown_received else 1)
            return
        if is_request and ("result" in message or "error" in message):
            # neither a request nor a response: pygls would take it for a reply, unanswered
            self._send_error(msg_id, ErrorCode.INVALID_REQUEST,
                             "invalid request: a message with a method and an id is a request, "
                             "which has no result or error")
            return
        if is_request and is_notification(method):
            # pygls would run it as a notification and never answer it: refuse it instead
            self._send_error(msg_id, ErrorCode.INVALID_REQUEST,
                             f"invalid request: {method} is a notification; send it without an id")
            return
        if is_request and not self.initialize_seen and method != lsp.INITIALIZE:
            self._send_error(msg_id, ErrorCode.SERVER_NOT_INITIALIZED,
                             f"{method}: the server is not initialized; send initialize first")
            return
        if is_request and self.server.stopping:
            self._send_error(msg_id, ErrorCode.INVALID_REQUEST,
                             f"{method}: the daemon is stopping")
            return
        if self.shutdown_received:  # from its arrival, not once its handler has run
            if is_request:
                self._send_error(msg_id, ErrorCode.INVALID_REQUEST,
                                 f"{method}: the server is shutting down; only exit is accepted")
            return
        if method == lsp.INITIALIZE:
            self.initialize_seen = True
        elif method == lsp.SHUTDOWN and is_request:
            self.shutdown_received = True
        try:
            try:
                structured = self.structure_message(message)
            except JsonRpcException as exc:
                if not self._is_early(msg_id):
                    raise
                # answered already: run it on what the early check validated
                log.warning("initialize params the server rejects (%s); using what it needs",
                            exc.__cause__ or exc)
                structured = self.structure_message(
                    {**message, "params": self._early.params.essentials()})
        except JsonRpcException as exc:
            if is_request:
                detail = f": {invalid_params_detail(exc.__cause__)}" if exc.__cause__ else ""
                self._send_error(msg_id, ErrorCode.INVALID_PARAMS,
                                 f"invalid params for {method}{detail}".splitlines()[0])
            return
        except Exception as exc:  # a malformed envelope (missing method/id fields, ...)
            if is_request:
                self._send_error(msg_id, ErrorCode.INVALID_REQUEST, f"invalid request: {exc}")
            return
        if is_request:
            self.unanswered.add(msg_id)
            self.all_answered.clear()
            if method == lsp.INITIALIZE:  # pygls's answer to it is replaced (send_message)
                self._initialize = (msg_id, self._initialize_answer(msg_id, message))
        self.handle_message(structured)

    def answered(self, msg_id: Any) -> None:
        """Every answer to a request handed to pygls comes here (the early one too)."""
        self.unanswered.discard(msg_id)
        if not self.unanswered:
            self.all_answered.set()

    def cancel_requested(self, msg_id: Any) -> bool:
        return self.server.cancel_turn_for_request(msg_id)

    def initialize_result(self, params: lsp.InitializeParams,
                          result: lsp.InitializeResult) -> lsp.InitializeResult:
        experimental = params.capabilities.experimental
        if isinstance(experimental, dict) and isinstance(experimental.get("heddle"), dict):
            self.client_heddle_capabilities = experimental["heddle"]
        result.capabilities.experimental = {"heddle": self.server.heddle_capabilities()}
        return result

    # -- outgoing -----------------------------------------------------------------------------
    def _send_error(self, msg_id, code: int, message: str) -> None:
        log.warning("answering %s with error %d: %s", msg_id, code, message)
        self.send_raw({"jsonrpc": "2.0", "id": msg_id, "error": {"code": int(code), "message": message}})

    def send_raw(self, payload: Any) -> None:
        if self.writer is not None:
            self.writer.write(encode(_encoder.encode(payload)))

    def _is_early(self, msg_id: Any) -> bool:
        return self._early is not None and msg_id == self._early.id

    def _initialize_answer(self, msg_id: Any, message: dict) -> dict[str, Any] | None:
        """The result the daemon answers `initialize` with: the early one, or the same
        computed now."""
        if self._is_early(msg_id):
            return self._early.result
        try:
            params = msgspec.convert(message.get("params"), EarlyInitializeParams)
            result = initialize_result(params)
        except msgspec.ValidationError:
            return None  # pygls answers (or refuses) what it makes of them
        result["capabilities"]["experimental"] = {"heddle": self.server.heddle_capabilities()}
        return result

    def send_message(self, payload: dict[str, Any]) -> None:
        """Whatever pygls sends, but the answer to `initialize` is the daemon's own (and not
        sent again if it went out early)."""
        msg_id = payload.get("id")
        if self._initialize is not None and msg_id == self._initialize[0] \
                and "method" not in payload:
            (_, ours), self._initialize = self._initialize, None
            early = self._is_early(msg_id)
            if early:
                self._early = None
            if ours is not None and payload.get("result") != ours:
                log.warning("initialize is answered with %s but the server computes %s",
                            ours, payload.get("result", payload.get("error")))
            if early:
                return
            if ours is not None and "result" in payload:
                payload = {**payload, "result": ours}
        self.send_raw(payload)

    def notify_struct(self, method: str, params: msgspec.Struct) -> None:
        """Fast path for notifications whose params are msgspec Structs."""
        self.send_raw({"jsonrpc": "2.0", "method": method, "params": params})

    async def request(self, method: str, params: Any, timeout: float) -> Any:
        """Send a server→client request and wait at most `timeout` seconds for the reply.

        However the wait ends without a reply, the client is told with `$/cancelRequest`.
        """
        msg_id = str(uuid.uuid4())
        # sent and answered as plain JSON, also for LSP methods (`workspace/applyEdit`), which
        # pygls would wrap in its own types: the caller converts the answer with msgspec
        future: Future[Any] = Future()
        self._request_futures[msg_id] = future
        self.send_raw({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        try:
            with anyio.fail_after(timeout):
                return await asyncio.wrap_future(future)
        finally:
            if not future.done() or future.cancelled():
                self.forget_request(msg_id)
                self.notify_struct(lsp.CANCEL_REQUEST, _CancelParams(msg_id))


class _CancelParams(msgspec.Struct):
    id: str
