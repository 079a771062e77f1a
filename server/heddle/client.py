"""A small asyncio JSON-RPC client for the daemon over a child process's stdio.

`heddle ask` uses it; it needs neither pygls nor the model SDK, so it starts fast.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any, Awaitable, Callable

import msgspec

from heddle.frames import Decoder, FrameError, encode

log = logging.getLogger(__name__)

Handler = Callable[[Any], Awaitable[Any] | Any]


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None):
        super().__init__(f"{message} ({code})")
        self.code = code
        self.message = message
        self.data = data


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self._reader = reader
        self._writer = writer
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._notify: dict[str, Callable[[Any], None]] = {}
        self._requests: dict[str, Handler] = {}
        self._answering: dict[Any, asyncio.Task] = {}
        self._closed = asyncio.Event()
        self._reader_task = asyncio.ensure_future(self._read_loop())

    def on_notification(self, method: str, fn: Callable[[Any], None]) -> None:
        self._notify[method] = fn

    def on_request(self, method: str, fn: Handler) -> None:
        self._requests[method] = fn

    def _send(self, payload: dict) -> None:
        body = msgspec.json.encode(payload)
        self._writer.write(encode(body))

    async def request(self, method: str, params: Any = None, msg_id: int | None = None) -> Any:
        msg_id = next(self._ids) if msg_id is None else msg_id
        future = asyncio.get_running_loop().create_future()
        self._pending[msg_id] = future
        self._send({"jsonrpc": "2.0", "id": msg_id, "method": method,
                    "params": msgspec.to_builtins(params)})
        await self._writer.drain()
        try:
            return await future
        finally:
            self._pending.pop(msg_id, None)

    def notify(self, method: str, params: Any = None) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": msgspec.to_builtins(params)})

    def next_id(self) -> int:
        return next(self._ids)

    async def closed(self) -> None:
        await self._closed.wait()

    async def _read_loop(self) -> None:
        frames = Decoder()
        try:
            while True:
                data = await self._reader.read(1 << 16)
                if not data:  # a message cut short here was the daemon's last words
                    return
                for body in frames.messages(data):
                    self._dispatch(msgspec.json.decode(body))
        except (FrameError, msgspec.DecodeError) as exc:  # the daemon's stdout is corrupt
            log.error("cannot read the daemon's output: %s", exc)
        except ConnectionError:
            return
        finally:
            self._closed.set()
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(ConnectionError("the daemon closed the connection"))

    def _dispatch(self, message: dict) -> None:
        if "method" in message and "id" in message:
            msg_id = message["id"]
            task = self._answering[msg_id] = asyncio.ensure_future(self._answer(message))
            task.add_done_callback(lambda _: self._answering.pop(msg_id, None))
        elif message.get("method") == "$/cancelRequest":
            # The daemon withdrew a request (its turn was cancelled, or it timed out): stop
            # answering it. It has forgotten the request, so no reply is sent.
            task = self._answering.get((message.get("params") or {}).get("id"))
            if task is not None:
                task.cancel()
        elif "method" in message:
            fn = self._notify.get(message["method"])
            if fn is not None:
                fn(message.get("params"))
        else:
            future = self._pending.get(message.get("id"))
            if future is None or future.done():
                return
            if "error" in message:
                err = message["error"]
                future.set_exception(RpcError(err.get("code", 0), err.get("message", ""), err.get("data")))
            else:
                future.set_result(message.get("result"))

    async def _answer(self, message: dict) -> None:
        fn = self._requests.get(message["method"])
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
        if fn is None:
            reply["error"] = {"code": -32601, "message": f"unknown method {message['method']}"}
        else:
            try:
                result = fn(message.get("params"))
                if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
                    result = await result
                reply["result"] = msgspec.to_builtins(result)
            except Exception as exc:
                reply["error"] = {"code": -32603, "message": str(exc)}
        self._send(reply)
