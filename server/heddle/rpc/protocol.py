"""pygls protocol subclass: raw-dict params, msgspec encoding, and the lifecycle rules.

pygls does the dispatch; this class fixes what it gets wrong for a long-lived agent daemon:
custom params stay plain dicts (validated by msgspec in the handlers), requests before
`initialize` and after `shutdown` get clear errors, late replies to abandoned server requests
are ignored, `$/cancelRequest` on a turn cancels the turn (which then resolves `cancelled`),
and outgoing messages are encoded by msgspec onto a non-blocking writer.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from concurrent.futures import Future
from typing import Any

import anyio
import msgspec
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pygls.protocol import LanguageServerProtocol, default_converter
from pygls.protocol.json_rpc import (JsonRPCNotification, JsonRPCRequestMessage,
                                     JsonRPCResponseMessage)
from pygls.protocol.language_server import lsp_method

from heddle_protocol import ErrorCode
from heddle.rpc.boot import EarlyInitialize, valid_id
from heddle.rpc.framing import BadInput
from heddle.rpc.transport import frame

log = logging.getLogger(__name__)


class RpcError(JsonRpcException):
    """A clean JSON-RPC error: code and message, never a traceback."""

    def __init__(self, code: int, message: str):
        super().__init__(message=message, code=int(code), data=None)


def _is_struct(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, msgspec.Struct)


def heddle_converter():
    c = default_converter()
    c.register_structure_hook(JsonRPCRequestMessage, lambda o, cls: cls(
        id=o.get("id"), method=o["method"], params=o.get("params"), jsonrpc=o["jsonrpc"]))
    c.register_structure_hook(JsonRPCNotification, lambda o, cls: cls(
        method=o["method"], params=o.get("params"), jsonrpc=o["jsonrpc"]))
    c.register_structure_hook(JsonRPCResponseMessage, lambda o, cls: cls(
        id=o.get("id"), result=o.get("result"), jsonrpc=o["jsonrpc"]))
    c.register_unstructure_hook_func(_is_struct, msgspec.to_builtins)
    c.register_structure_hook_func(_is_struct, lambda o, t: msgspec.convert(o, t))
    return c


_encoder = msgspec.json.Encoder()


class HeddleProtocol(LanguageServerProtocol):
    def __init__(self, server, converter):
        super().__init__(server, converter)
        self.initialize_seen = False
        self.client_heddle_capabilities: dict[str, Any] = {}
        self._early: EarlyInitialize | None = None
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
            self._server.request_stop(0 if self.shutdown_received else 1)
            return
        if is_request and not self.initialize_seen and method != lsp.INITIALIZE:
            self._send_error(msg_id, ErrorCode.SERVER_NOT_INITIALIZED,
                             f"{method}: the server is not initialized; send initialize first")
            return
        if is_request and self._server.stopping:
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
                structured = LanguageServerProtocol.structure_message(self, message)
            except JsonRpcException as exc:
                if not self._is_early(msg_id):
                    raise
                # answered already: run it on what the early check validated
                log.warning("initialize params the server rejects (%s); using what it needs",
                            exc.__cause__ or exc)
                structured = LanguageServerProtocol.structure_message(
                    self, {**message, "params": self._early.params.essentials()})
        except JsonRpcException as exc:
            if is_request:
                detail = f": {exc.__cause__}" if exc.__cause__ else ""
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
        self.handle_message(structured)

    def _send_response(self, msg_id, result=None, error=None):
        """Every answer to a request handed to pygls comes here (the early one too)."""
        super()._send_response(msg_id, result, error)
        self.unanswered.discard(msg_id)
        if not self.unanswered:
            self.all_answered.set()

    def _handle_response(self, msg_id, result=None, error=None):
        future = self._request_futures.get(msg_id)
        if future is not None and future.done():
            self._request_futures.pop(msg_id, None)
            log.info("ignoring a late reply to request %s", msg_id)
            return
        super()._handle_response(msg_id, result, error)

    def _handle_cancel_notification(self, msg_id):
        if self._server.cancel_turn_for_request(msg_id):
            return
        super()._handle_cancel_notification(msg_id)

    @lsp_method(lsp.INITIALIZE)
    def lsp_initialize(self, params: lsp.InitializeParams):
        result = yield from super().lsp_initialize(params)
        experimental = params.capabilities.experimental
        if isinstance(experimental, dict) and isinstance(experimental.get("heddle"), dict):
            self.client_heddle_capabilities = experimental["heddle"]
        result.capabilities.experimental = {"heddle": self._server.heddle_capabilities()}
        return result

    # -- outgoing -----------------------------------------------------------------------------
    def _send_error(self, msg_id, code: int, message: str) -> None:
        log.warning("answering %s with error %d: %s", msg_id, code, message)
        self.send_raw({"jsonrpc": "2.0", "id": msg_id, "error": {"code": int(code), "message": message}})

    def send_raw(self, payload: Any) -> None:
        if self.writer is not None:
            self.writer.write(frame(_encoder.encode(payload)))

    def _is_early(self, msg_id: Any) -> bool:
        return self._early is not None and msg_id == self._early.id

    def _send_data(self, data: Any) -> None:
        if not data:
            return
        if self._is_early(getattr(data, "id", None)) and not hasattr(data, "method"):
            self._drop_early_answer(data)
            return
        try:
            payload = self._converter.unstructure(data)
            if isinstance(data, JsonRPCResponseMessage) and "result" not in payload:
                payload["result"] = None
            self.send_raw(payload)
        except Exception:
            log.exception("cannot send a message")

    def _drop_early_answer(self, data: Any) -> None:
        early, self._early = self._early, None
        payload = self._converter.unstructure(data)
        if payload.get("result") != early.result:
            log.warning("initialize was answered with %s but the server computes %s",
                        early.result, payload.get("result", payload.get("error")))

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
                self._request_futures.pop(msg_id, None)
                self.notify_struct(lsp.CANCEL_REQUEST, _CancelParams(msg_id))


class _CancelParams(msgspec.Struct):
    id: str
