"""Every touch of pygls internals, in one place: pygls is pinned (pyproject.toml) because of
this module, and tests/unit/test_pygls_adapter.py fails if pygls changes underneath it.

`PyglsProtocol` is pygls's `LanguageServerProtocol` with its private members overridden so
that the rest of the daemon sees small public hooks instead (`HeddleProtocol` implements them):

- `_send_data(data)`: the one exit of every message pygls sends (answers, requests,
  notifications). pygls would `json.dumps` it with a default hook and write it itself; here
  it is unstructured with pygls's converter (`_converter`) and handed to `send_message` as a
  plain dict, so the daemon encodes it with msgspec onto its own non-blocking transport and
  can drop the answer to an `initialize` it answered early (rpc/boot.py). A response whose
  result is None would lose its `result` key (cattrs omits None); it is put back.
- `_send_response(msg_id, result, error)`: the one path of every answer to a request (pygls
  calls it from the handler's done callback and for each error it answers itself); after it,
  `answered(msg_id)` is called, so the daemon knows which requests are still unanswered when
  it stops.
- `_handle_response(msg_id, result, error)`: a reply to a server→client request. pygls sets
  the result on the request's future; if that future is already done (the daemon gave up
  waiting) it would raise `InvalidStateError`. Such a late reply is logged and ignored.
- `_handle_cancel_notification(msg_id)`: `$/cancelRequest` from the client. pygls cancels
  the request's future, which does nothing once a handler runs; `cancel_requested(msg_id)`
  is asked first (the daemon cancels the turn of a `turn/start`, which then resolves
  `cancelled`), and pygls's own handling runs only if it declines.
- `_request_futures`: pygls's table of requests in flight, both ways. `forget_request` drops
  a server→client request the daemon stopped waiting for, so a late reply finds it gone.
- `lsp_initialize`: pygls's built-in `initialize` (registered through `lsp_method`). It still
  sets the client capabilities and the workspace and computes the result;
  `initialize_result(params, result)` may amend it (Heddle's experimental capabilities).
- `_server`: the server that owns the protocol, exposed as `server`.
- The JSON-RPC message classes pygls structures incoming messages into
  (`JsonRPCRequestMessage`, `JsonRPCNotification`, `JsonRPCResponseMessage`): `converter()`
  registers hooks for them that keep the params of Heddle's own methods as plain dicts (pygls
  would turn them into namedtuples and lose keys), and msgspec Structs convert both ways.

Everything else the daemon uses of pygls is its public API: `LanguageServer` and its
`feature` decorator, `protocol`, `structure_message`, `handle_message`, `send_request`,
`set_writer`, `writer`, `report_server_error`, `JsonRpcException`, `Workspace`, `to_fs_path`.
"""

from __future__ import annotations

import logging
from typing import Any, Generator

import msgspec
from lsprotocol import types as lsp
from pygls.protocol import LanguageServerProtocol, default_converter
from pygls.protocol.json_rpc import (JsonRPCNotification, JsonRPCRequestMessage,
                                     JsonRPCResponseMessage)
from pygls.protocol.language_server import lsp_method

log = logging.getLogger(__name__)


def _is_struct(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, msgspec.Struct)


def converter():
    """pygls's converter, with params kept as sent and msgspec Structs converted both ways."""
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


class PyglsProtocol(LanguageServerProtocol):
    """pygls's protocol, seen through public hooks (see the module docstring)."""

    # -- hooks for the subclass ---------------------------------------------------------------
    def send_message(self, payload: dict[str, Any]) -> None:
        """Send one outgoing message, a plain JSON-able dict."""
        raise NotImplementedError

    def answered(self, msg_id: Any) -> None:
        """The answer to request `msg_id` was just sent."""

    def cancel_requested(self, msg_id: Any) -> bool:
        """`$/cancelRequest` for `msg_id`: True if handled (pygls's handling is skipped)."""
        return False

    def initialize_result(self, params: lsp.InitializeParams,
                          result: lsp.InitializeResult) -> lsp.InitializeResult:
        """The `initialize` result pygls computed, to amend."""
        return result

    # -- what the subclass may use ------------------------------------------------------------
    @property
    def server(self) -> Any:
        return self._server

    def forget_request(self, msg_id: Any) -> None:
        """Stop waiting for the reply to server→client request `msg_id`."""
        self._request_futures.pop(msg_id, None)

    # -- the overrides ------------------------------------------------------------------------
    def _send_data(self, data: Any) -> None:
        if not data:
            return
        try:
            payload = self._converter.unstructure(data)
            if isinstance(data, JsonRPCResponseMessage) and "result" not in payload:
                payload["result"] = None
            self.send_message(payload)
        except Exception:
            log.exception("cannot send a message")

    def _send_response(self, msg_id, result=None, error=None) -> None:
        super()._send_response(msg_id, result, error)
        self.answered(msg_id)

    def _handle_response(self, msg_id, result=None, error=None) -> None:
        future = self._request_futures.get(msg_id)
        if future is not None and future.done():
            self._request_futures.pop(msg_id, None)
            log.info("ignoring a late reply to request %s", msg_id)
            return
        super()._handle_response(msg_id, result, error)

    def _handle_cancel_notification(self, msg_id) -> None:
        if self.cancel_requested(msg_id):
            return
        super()._handle_cancel_notification(msg_id)

    @lsp_method(lsp.INITIALIZE)
    def lsp_initialize(self, params: lsp.InitializeParams
                       ) -> Generator[Any, Any, lsp.InitializeResult]:
        result = yield from super().lsp_initialize(params)
        return self.initialize_result(params, result)
