"""Starting the daemon: `initialize` answered while the server loads, nothing reordered or lost."""

from __future__ import annotations

import asyncio
import logging

import msgspec
import pytest

from heddle.rpc.boot import Boot, EarlyInitializeParams, initialize_result
from heddle.rpc.server import HeddleServer
from heddle.frames import Decoder
from heddle.tools import BUILTIN_TOOL_NAMES
from heddle.tools.registry import builtin_tools

VSCODE_LIKE = {
    "processId": 4242, "rootUri": "file:///work/project", "rootPath": "/work/project",
    "clientInfo": {"name": "Visual Studio Code", "version": "1.100.0"}, "locale": "en",
    "workspaceFolders": [{"uri": "file:///work/project", "name": "project"}],
    "capabilities": {
        "general": {"positionEncodings": ["utf-16"], "markdown": {"parser": "marked"}},
        "textDocument": {"synchronization": {"dynamicRegistration": True, "willSave": True,
                                             "willSaveWaitUntil": True, "didSave": True}},
        "workspace": {"workspaceFolders": True, "configuration": True,
                      "fileOperations": {"didCreate": True, "willRename": True}},
        "window": {"workDoneProgress": True},
        "experimental": {"heddle": {"permissionRequests": True}},
    },
    "trace": "off",
}

PARAMS = [
    {"processId": None, "capabilities": {}},
    {"processId": 1, "rootUri": None, "capabilities": {"general": {"positionEncodings": ["utf-8"]}}},
    {"processId": 1, "capabilities": {"general": {"positionEncodings": ["utf-7", "utf-32", "utf-8"]}}},
    {"processId": 1, "capabilities": {"general": {"positionEncodings": ["utf-7"]}}},
    {"processId": 1, "capabilities": {"textDocument": {"synchronization": {"willSave": False}}}},
    {"processId": 1, "capabilities": {"textDocument": {"synchronization": {
        "willSaveWaitUntil": True, "willSave": None}}}},
    VSCODE_LIKE,
]


class Capture:
    """Where a protocol under test writes: the messages it sent, decoded."""

    def __init__(self) -> None:
        self.messages: list[dict] = []

    def write(self, data: bytes) -> None:
        self.messages.extend(msgspec.json.decode(body) for body in Decoder().messages(data))


def server_with_capture() -> tuple[HeddleServer, Capture]:
    server = HeddleServer(env={"HEDDLE_NO_TRANSCRIPTS": "1"})
    out = Capture()
    server.protocol.set_writer(out)
    return server, out


def handed_over(boot: Boot, caplog) -> tuple[HeddleServer, Capture]:
    """A server that takes over from `boot` (warnings captured), and what it sent."""
    server, out = server_with_capture()
    server.protocol.answered_early(boot.early)
    with caplog.at_level(logging.WARNING):
        boot.hand_over(server.protocol.handle_raw, lambda why: None)
    return server, out


def initialize(msg_id, params) -> dict:
    return {"jsonrpc": "2.0", "id": msg_id, "method": "initialize", "params": params}


@pytest.mark.parametrize("params", PARAMS)
def test_the_early_answer_is_what_the_server_answers(params, caplog):
    """The server answers with the early answer's result, and pygls computes the same."""
    server, out = server_with_capture()
    with caplog.at_level(logging.WARNING):
        server.protocol.handle_raw(initialize(1, params))
    assert out.messages == [{"jsonrpc": "2.0", "id": 1, "result": initialize_result(
        msgspec.convert(params, EarlyInitializeParams))}]
    assert "the server computes" not in caplog.text


def test_the_answer_is_the_early_one_even_where_pygls_computes_another(caplog):
    """One answer to `initialize` however fast the server loads; a difference is logged."""
    server, out = server_with_capture()
    server.feature("textDocument/hover")(lambda params: None)  # pygls would offer hover now
    with caplog.at_level(logging.WARNING):
        server.protocol.handle_raw(initialize(1, PARAMS[0]))
    assert out.messages == [{"jsonrpc": "2.0", "id": 1, "result": initialize_result(
        msgspec.convert(PARAMS[0], EarlyInitializeParams))}]
    assert "the server computes" in caplog.text and "hoverProvider" in caplog.text


def test_the_tool_list_matches_the_registry():
    assert tuple(builtin_tools()) == BUILTIN_TOOL_NAMES


class Transport:
    """What Boot uses of the transport: writing, and counting the messages it keeps."""

    def __init__(self) -> None:
        self.out = Capture()
        self.held = 0

    def write(self, data: bytes) -> None:
        self.out.write(data)

    def hold(self, n: int) -> None:
        self.held += n


def booting() -> tuple[Boot, Transport]:
    boot = Boot()
    boot.transport = Transport()
    return boot, boot.transport


def test_initialize_is_answered_at_once_and_everything_is_kept_in_order():
    boot, transport = booting()
    messages = [initialize(1, VSCODE_LIKE),
                {"jsonrpc": "2.0", "method": "initialized", "params": {}},
                {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {}}]
    for message in messages:
        boot.on_message(message)
    boot.on_close("stdin closed")
    assert transport.held == len(messages)  # the transport stops reading past its bound
    assert transport.out.messages == [{"jsonrpc": "2.0", "id": 1, "result": initialize_result(
        msgspec.convert(VSCODE_LIKE, EarlyInitializeParams))}]
    assert boot.early is not None and boot.early.id == 1

    seen: list[object] = []
    boot.hand_over(seen.append, lambda why: seen.append(("closed", why)))
    assert seen == [*messages, ("closed", "stdin closed")]
    assert transport.held == 0
    later = {"jsonrpc": "2.0", "method": "exit"}
    boot.on_message(later)
    assert seen[-1] is later
    assert len(transport.out.messages) == 1


@pytest.mark.parametrize("first", [
    initialize(1, {"capabilities": {}}),  # processId is required
    initialize(1, {"processId": "me", "capabilities": {}}),
    initialize(1, None),
    {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {}},
    {"jsonrpc": "1.0", "id": 1, "method": "initialize", "params": PARAMS[0]},
    {"jsonrpc": "2.0", "id": [1], "method": "initialize", "params": PARAMS[0]},
])
def test_only_a_valid_initialize_first_is_answered_early(first):
    boot, transport = booting()
    boot.on_message({"jsonrpc": "2.0", "method": "$/setTrace", "params": {"value": "off"}})
    boot.on_message(first)
    boot.on_message(initialize(2, PARAMS[0]))  # a second try waits for the server
    assert transport.out.messages == [] and boot.early is None


async def answers(out: Capture, count: int) -> list[dict]:
    """The first `count` messages the server sends (its handlers run on the event loop)."""
    for _ in range(200):
        if len(out.messages) >= count:
            break
        await asyncio.sleep(0.01)
    return out.messages


async def test_the_server_runs_the_early_initialize_without_answering_again():
    boot, transport = booting()
    boot.on_message(initialize("a", VSCODE_LIKE))
    boot.on_message({"jsonrpc": "2.0", "id": "b", "method": "session/list", "params": {}})
    server, out = server_with_capture()
    server.protocol.answered_early(boot.early)
    boot.hand_over(server.protocol.handle_raw, lambda why: None)
    assert [m.get("id") for m in await answers(out, 1)] == ["b"]
    assert "result" in out.messages[0]
    assert server.protocol.client_heddle_capabilities == {"permissionRequests": True}
    assert server.protocol.workspace.root_uri == "file:///work/project"
    # the next initialize (a client error) is answered by the server as usual
    server.protocol.handle_raw(initialize("c", PARAMS[0]))
    assert [m.get("id") for m in await answers(out, 2)] == ["b", "c"]


async def test_params_only_the_server_rejects_still_initialize(caplog):
    bad = {**VSCODE_LIKE, "capabilities": {**VSCODE_LIKE["capabilities"], "window": 5}}
    boot, transport = booting()
    boot.on_message(initialize(1, bad))
    assert "result" in transport.out.messages[0]
    server, out = handed_over(boot, caplog)
    assert out.messages == []
    assert "initialize params the server rejects" in caplog.text
    assert server.protocol.client_heddle_capabilities == {"permissionRequests": True}
    server.protocol.handle_raw({"jsonrpc": "2.0", "id": 2, "method": "session/list", "params": {}})
    assert (await answers(out, 1))[0]["id"] == 2 and "result" in out.messages[0]


def test_a_different_server_answer_is_logged(caplog):
    boot, transport = booting()
    boot.on_message(initialize(1, PARAMS[0]))
    boot.early.result["serverInfo"]["version"] = "0.0.0-stale"
    server, out = handed_over(boot, caplog)
    assert out.messages == []
    assert "the server computes" in caplog.text


async def test_a_message_that_fails_during_start_up_does_not_stop_the_rest():
    boot, transport = booting()
    boot.on_message(initialize(1, PARAMS[0]))
    boot.on_message({"jsonrpc": "2.0", "id": 2, "method": "session/list", "params": {}})
    server, out = server_with_capture()
    server.protocol.answered_early(boot.early)
    handled = []

    def on_message(message):
        handled.append(message.get("id"))
        if message.get("id") == 1:
            raise RuntimeError("a handler bug")
        server.protocol.handle_raw(message)

    boot.hand_over(on_message, lambda why: None)
    assert handled == [1, 2]
    assert [m.get("id") for m in await answers(out, 1)] == [2]
