"""Starting the daemon: answer `initialize` while the language-server machinery loads.

Importing pygls and lsprotocol costs most of a second of CPU (`lsprotocol.types` alone is a
large module of attrs classes), and an editor can do nothing until `initialize` is answered.
So the stdio transport starts first, with nothing but the standard library, msgspec and the
protocol package behind it; the rest of the daemon is imported in a worker thread. Meanwhile:

- a valid `initialize` request is answered at once with the same result the server computes
  later (the static capabilities, the position encoding negotiated from the client's list, and
  Heddle's capabilities), and
- every message is kept, in order, and handed to the server once it is ready, `initialize`
  first. The server runs `initialize` normally (its state — client capabilities, workspace — is
  set as usual) and drops its own answer, which was already sent.

Nothing is answered out of order: before `initialize` has been answered a client may send
nothing but `initialize`, and every later message waits for the server.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import sys
from typing import Any, Callable

import msgspec

import heddle
from heddle_protocol import EVENT_TYPES, METHODS, PROTOCOL_VERSION
from heddle_protocol import types as wire
from heddle_protocol.events import event_kind
from heddle.frames import encode
from heddle.rpc.framing import FdReader, valid_id
from heddle.rpc.transport import StdioTransport
from heddle.tools import BUILTIN_TOOL_NAMES

log = logging.getLogger(__name__)

POSITION_ENCODINGS = ("utf-8", "utf-16", "utf-32")
"""The position encodings the server supports; the client's first supported one wins."""
DEFAULT_POSITION_ENCODING = "utf-16"


class _Folder(msgspec.Struct):
    uri: str
    name: str


class _General(msgspec.Struct):
    positionEncodings: list[str] | None = None


class _Synchronization(msgspec.Struct, omit_defaults=True):
    willSave: bool | None = None
    willSaveWaitUntil: bool | None = None


class _TextDocument(msgspec.Struct, omit_defaults=True):
    synchronization: _Synchronization | None = None


class _Capabilities(msgspec.Struct):
    general: _General | None = None
    textDocument: _TextDocument | None = None
    experimental: Any = None


class EarlyInitializeParams(msgspec.Struct):
    """The part of `InitializeParams` the early answer depends on, checked before answering."""

    processId: int | None
    capabilities: _Capabilities
    rootUri: str | None = None
    rootPath: str | None = None
    workspaceFolders: list[_Folder] | None = None

    def essentials(self) -> dict[str, Any]:
        """These params as a plain dict that any InitializeParams parser accepts."""
        caps: dict[str, Any] = {}
        for name in ("general", "textDocument", "experimental"):
            if (value := getattr(self.capabilities, name)) is not None:
                caps[name] = msgspec.to_builtins(value)
        out: dict[str, Any] = {"processId": self.processId, "capabilities": caps}
        for name in ("rootUri", "rootPath", "workspaceFolders"):
            if (value := getattr(self, name)) is not None:
                out[name] = msgspec.to_builtins(value)
        return out


def position_encoding(params: EarlyInitializeParams) -> str:
    general = params.capabilities.general
    for encoding in (general.positionEncodings or []) if general else []:
        if encoding in POSITION_ENCODINGS:
            return encoding
    return DEFAULT_POSITION_ENCODING


def heddle_capabilities(tools: list[str] | tuple[str, ...] = BUILTIN_TOOL_NAMES) -> dict[str, Any]:
    """`capabilities.experimental.heddle` of the `initialize` result."""
    return msgspec.to_builtins(wire.ServerHeddleCapabilities(
        protocol_version=PROTOCOL_VERSION, server_version=heddle.__version__,
        methods=[m.name for m in METHODS], event_kinds=[event_kind(c) for c in EVENT_TYPES],
        tools=list(tools)))


def text_document_sync(params: EarlyInitializeParams) -> dict[str, Any]:
    """Open/close and incremental changes; no will-save notifications (stated as unsupported
    to a client that says whether it sends them)."""
    sync: dict[str, Any] = {"openClose": True, "change": 2}
    text_document = params.capabilities.textDocument
    client = text_document.synchronization if text_document else None
    if client is not None:
        if client.willSave is not None:
            sync["willSave"] = False
        if client.willSaveWaitUntil is not None:
            sync["willSaveWaitUntil"] = False
    sync["save"] = False
    return sync


def initialize_result(params: EarlyInitializeParams) -> dict[str, Any]:
    """What the server answers to `initialize` with these params (a test keeps them equal)."""
    return {
        "capabilities": {
            "positionEncoding": position_encoding(params),
            "textDocumentSync": text_document_sync(params),
            "executeCommandProvider": {"commands": []},
            "workspace": {"workspaceFolders": {"supported": True, "changeNotifications": True},
                          "fileOperations": {}},
            "experimental": {"heddle": heddle_capabilities()},
        },
        "serverInfo": {"name": "heddle", "version": heddle.__version__},
    }


class EarlyInitialize(msgspec.Struct):
    """An `initialize` answered before the server was ready: what the server must know."""

    id: Any
    params: EarlyInitializeParams
    result: dict[str, Any]


class _Closed:
    def __init__(self, why: str):
        self.why = why


class Boot:
    """Routes the transport's messages: kept (and `initialize` answered) until the server is
    ready, then straight to it."""

    def __init__(self) -> None:
        self.transport: StdioTransport | None = None
        self.early: EarlyInitialize | None = None
        self._pending: list[object] = []
        self._seen_request = False
        self._on_message: Callable[[object], None] | None = None
        self._on_close: Callable[[str], None] | None = None

    def on_message(self, message: object) -> None:
        if self._on_message is not None:
            self._on_message(message)
            return
        if not self._seen_request and isinstance(message, dict) and "id" in message \
                and message.get("method") is not None:
            self._seen_request = True
            self._maybe_answer(message)
        self._pending.append(message)
        if self.transport is not None:
            self.transport.hold(1)  # it waits here: the transport bounds how many do

    def on_close(self, why: str) -> None:
        if self._on_close is not None:
            self._on_close(why)
        else:
            self._pending.append(_Closed(why))

    def _maybe_answer(self, message: dict) -> None:
        """Answer the client's first request now if it is a valid `initialize`."""
        if message.get("jsonrpc") != "2.0" or message.get("method") != "initialize" \
                or not valid_id(message["id"]) or self.transport is None:
            return
        try:
            params = msgspec.convert(message.get("params"), EarlyInitializeParams)
        except msgspec.ValidationError as exc:
            log.info("initialize waits for the server (%s)", exc)
            return
        self.early = EarlyInitialize(message["id"], params, initialize_result(params))
        self.transport.write(encode(msgspec.json.encode(
            {"jsonrpc": "2.0", "id": message["id"], "result": self.early.result})))

    def hand_over(self, on_message: Callable[[object], None],
                  on_close: Callable[[str], None]) -> None:
        """Deliver what was kept, in order, then route everything to the server."""
        pending, self._pending = self._pending, []
        for item in pending:
            try:
                if isinstance(item, _Closed):
                    on_close(item.why)
                else:
                    on_message(item)
            except Exception as exc:  # as after start-up: one bad message never stops the rest
                log.error("handling a message that arrived during start-up failed: %s", exc)
                log.info("handling a message that arrived during start-up failed",
                         exc_info=True)  # the traceback: log file only
        self._on_message, self._on_close = on_message, on_close
        if self.transport is not None:
            self.transport.hold(-sum(not isinstance(item, _Closed) for item in pending))


def _cannot_start(transport: StdioTransport, why: object) -> int:
    """Say why the daemon cannot start (log and `window/showMessage`), then stop: exit code 1."""
    log.critical("the daemon cannot start: %s", why)
    transport.write(encode(msgspec.json.encode({
        "jsonrpc": "2.0", "method": "window/showMessage",
        "params": {"type": 1, "message": f"Heddle cannot start: {why}"}})))
    transport.close()
    return 1


async def _serve(stdin, stdout, bad_setting: str | None) -> int:
    loop = asyncio.get_running_loop()
    boot = Boot()
    transport = StdioTransport(stdin, stdout, loop, boot.on_message, boot.on_close)
    boot.transport = transport
    transport.start()
    if bad_setting is not None:
        return _cannot_start(transport, bad_setting)
    try:
        server_module = await loop.run_in_executor(None, importlib.import_module,
                                                   "heddle.rpc.server")
        server = server_module.HeddleServer()
    except Exception as exc:  # a broken install or a bad setting: say so, then stop
        log.info("the daemon cannot start", exc_info=True)  # the traceback: log file only
        return _cannot_start(transport, exc)
    return await server.serve(transport, boot)


def serve_stdio(bad_setting: str | None = None) -> int:
    """Run the daemon on this process's stdin/stdout until `exit` or end of input.
    `bad_setting`: one read before it (HEDDLE_LOG_LEVEL), reported as any bad setting is."""
    stdin, stdout = FdReader(sys.stdin.fileno()), sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print() must never corrupt the protocol stream
    try:
        code = asyncio.run(_serve(stdin, stdout, bad_setting))
    except KeyboardInterrupt:
        code = 130
    # Exit now: a worker thread may still be importing the model SDK, and the stdin reader
    # thread is blocked in read(); neither has anything left to do.
    logging.shutdown()
    sys.stderr.flush()
    os._exit(code)
