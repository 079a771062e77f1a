"""How every Heddle method is served: params validated against the method table's Struct
(`-32602` names the field), and every failure mapped to a clean JSON-RPC error, never a
traceback."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable

import anyio
import msgspec
from pygls.exceptions import JsonRpcException

from heddle_protocol import ErrorCode, Kind, method
from heddle.rpc.daemon import Daemon
from heddle.rpc.protocol import RpcError
from heddle.sessions.session import SessionError

log = logging.getLogger(__name__)

_SESSION_CODES = {"notFound": ErrorCode.SESSION_NOT_FOUND, "busy": ErrorCode.SESSION_BUSY,
                  "compacting": ErrorCode.SESSION_BUSY,
                  "workspace": ErrorCode.INVALID_WORKSPACE,
                  "transcript": ErrorCode.TRANSCRIPT_UNREADABLE,
                  "inUse": ErrorCode.SESSION_IN_USE,
                  "compact": ErrorCode.COMPACTION_FAILED, "prompt": ErrorCode.INVALID_PARAMS,
                  "options": ErrorCode.INVALID_PARAMS}
_HINTS = {"busy": "; cancel it, or send ifBusy interrupt or queue",
          "compacting": "; send the prompt once session/compact has answered"}
"""How to go on after `turn/start` was refused (other methods say so in their own message)."""


def handler(server: Daemon, name: str, fn: Callable[[Any], Awaitable[Any]]):
    """Register `fn` for `name`: validate params with the table's type, map every failure to a
    clean JSON-RPC error."""
    entry = method(name)

    async def handle(params: Any) -> Any:
        # Known until answered: pygls sends the answer from a done callback it added before
        # this runs, so the discard below comes after it.
        task = asyncio.current_task()
        server.requests_running.add(task)
        task.add_done_callback(server.requests_running.discard)
        try:
            typed = msgspec.convert({} if params is None else params, entry.params)
        except msgspec.ValidationError as exc:
            raise RpcError(ErrorCode.INVALID_PARAMS, f"invalid params for {name}: {exc}") from None
        try:
            result = await fn(typed)
        except SessionError as exc:
            if exc.kind == "sessionId":
                raise RpcError(ErrorCode.INVALID_PARAMS,
                               f"invalid params for {name}: {exc} - at `$.sessionId`") from None
            hint = _HINTS.get(exc.kind, "") if name == "turn/start" else ""
            raise RpcError(_SESSION_CODES[exc.kind], f"{exc}{hint}") from None
        except (JsonRpcException, anyio.get_cancelled_exc_class()):
            raise
        except Exception as exc:
            log.exception("%s failed", name)
            raise RpcError(ErrorCode.INTERNAL_ERROR,
                           f"{name} failed inside the daemon: {type(exc).__name__}: {exc}") from None
        if entry.kind is Kind.NOTIFICATION:
            return None
        return msgspec.to_builtins(result)

    handle.__name__ = "handle_" + name.replace("/", "_")
    server.feature(name)(handle)
