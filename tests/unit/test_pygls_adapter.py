"""What `heddle.rpc.pygls_adapter` relies on in pygls, one test per override, on real pygls
objects: each fails if pygls changes underneath the adapter (a private member gone, its
signature changed, or the behaviour the daemon relies on changed). Upgrading pygls means
making these pass (pyproject.toml pins it for this reason)."""

from __future__ import annotations

import inspect
import logging
from concurrent.futures import Future

import pytest
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.protocol import JsonRPCProtocol, LanguageServerProtocol

from heddle.rpc.pygls_adapter import PyglsProtocol, converter


class Recording(PyglsProtocol):
    """The adapter's hooks, implemented to record what pygls hands them."""

    def __init__(self, server, conv):
        super().__init__(server, conv)
        self.sent: list[dict] = []
        self.answers: list[object] = []
        self.cancels: list[object] = []
        self.take_cancels = False

    def send_message(self, payload):
        self.sent.append(payload)

    def answered(self, msg_id):
        self.answers.append(msg_id)

    def cancel_requested(self, msg_id):
        self.cancels.append(msg_id)
        return self.take_cancels

    def initialize_result(self, params, result):
        result.capabilities.experimental = {"amended": params.process_id}
        return result


class Written:
    def __init__(self):
        self.data: list[bytes] = []

    def write(self, data):
        self.data.append(data)


@pytest.fixture
def protocol() -> Recording:
    server = LanguageServer("adapter-test", "1", protocol_cls=Recording,
                            converter_factory=converter)
    server.protocol.set_writer(Written())
    seen = server.protocol.params_seen = []

    @server.feature("x/echo")
    def echo(params):
        seen.append(params)
        return params.get("answer") if isinstance(params, dict) else None

    @server.feature("x/fail")
    def fail(params):
        raise JsonRpcException(code=-32001, message="no")

    return server.protocol


def incoming(protocol: Recording, message: dict) -> None:
    protocol.handle_message(protocol.structure_message(message))


@pytest.mark.parametrize("name, params", [
    ("_send_data", ["self", "data"]),
    ("_send_response", ["self", "msg_id", "result", "error"]),
    ("_handle_response", ["self", "msg_id", "result", "error"]),
    ("_handle_cancel_notification", ["self", "msg_id"]),
])
def test_each_overridden_private_method_is_still_there_with_its_signature(name, params):
    assert list(inspect.signature(getattr(JsonRPCProtocol, name)).parameters) == params
    assert getattr(PyglsProtocol, name) is not getattr(JsonRPCProtocol, name)


def test_the_private_attributes_used_are_still_there(protocol):
    assert isinstance(protocol._request_futures, dict)
    assert protocol._converter.unstructure(lsp.Position(1, 2)) == {"line": 1, "character": 2}
    assert isinstance(protocol.server, LanguageServer) and protocol.server.protocol is protocol
    assert LanguageServerProtocol.lsp_initialize.method_name == lsp.INITIALIZE
    assert protocol.fm.builtin_features[lsp.INITIALIZE] == protocol.lsp_initialize


def test_send_data_is_the_one_exit_of_what_pygls_sends(protocol):
    """Answers, requests and notifications all reach `send_message` as plain dicts, and pygls
    writes nothing itself."""
    incoming(protocol, {"jsonrpc": "2.0", "id": 1, "method": "x/echo",
                        "params": {"answer": {"b": [2]}}})
    incoming(protocol, {"jsonrpc": "2.0", "id": 2, "method": "x/echo", "params": {}})
    protocol.notify("x/note", {"a": 1})
    protocol.send_request("x/ask", {"q": 1}, msg_id="r1")
    assert protocol.sent == [
        {"jsonrpc": "2.0", "id": 1, "result": {"b": [2]}},
        {"jsonrpc": "2.0", "id": 2, "result": None},  # the result key is kept
        {"jsonrpc": "2.0", "method": "x/note", "params": {"a": 1}},
        {"jsonrpc": "2.0", "id": "r1", "method": "x/ask", "params": {"q": 1}},
    ]
    assert protocol.writer.data == []


def test_params_of_custom_methods_stay_plain_dicts(protocol):
    incoming(protocol, {"jsonrpc": "2.0", "id": 1, "method": "x/echo",
                        "params": {"type_name": "t", "nested": {"k": None}}})
    assert protocol.params_seen == [{"type_name": "t", "nested": {"k": None}}]


def test_send_response_is_the_path_of_every_answer(protocol):
    """Results, errors a handler raises and errors pygls makes itself (unknown method)."""
    incoming(protocol, {"jsonrpc": "2.0", "id": 1, "method": "x/echo", "params": {}})
    incoming(protocol, {"jsonrpc": "2.0", "id": 2, "method": "x/fail", "params": {}})
    incoming(protocol, {"jsonrpc": "2.0", "id": 3, "method": "x/nothing", "params": {}})
    incoming(protocol, {"jsonrpc": "2.0", "method": "x/echo", "params": {}})  # a notification
    assert protocol.answers == [1, 2, 3]
    assert [m["error"]["code"] for m in protocol.sent[1:]] == [-32001, -32601]


def test_handle_response_resolves_a_pending_request_and_ignores_a_late_reply(protocol, caplog):
    pending = protocol.send_request("x/ask", {}, msg_id="a")
    abandoned = protocol.send_request("x/ask", {}, msg_id="b")
    assert set(protocol._request_futures) == {"a", "b"}  # where pygls keeps them
    assert abandoned.cancel()
    with caplog.at_level(logging.INFO):
        incoming(protocol, {"jsonrpc": "2.0", "id": "b", "result": {"late": True}})
    assert "ignoring a late reply to request b" in caplog.text
    assert "b" not in protocol._request_futures
    incoming(protocol, {"jsonrpc": "2.0", "id": "a", "result": {"x": 1}})
    assert pending.result(0) == {"x": 1}
    errored = protocol.send_request("x/ask", {}, msg_id="c")
    incoming(protocol, {"jsonrpc": "2.0", "id": "c", "error": {"code": -1, "message": "no"}})
    assert isinstance(errored.exception(0), JsonRpcException)


def test_forget_request_drops_it_so_a_reply_finds_nothing(protocol):
    future = protocol.send_request("x/ask", {}, msg_id="f")
    protocol.forget_request("f")
    assert "f" not in protocol._request_futures
    incoming(protocol, {"jsonrpc": "2.0", "id": "f", "result": {}})
    assert not future.done()


@pytest.mark.parametrize("taken", [True, False])
def test_a_cancel_request_is_offered_to_the_daemon_first(protocol, taken):
    protocol.take_cancels = taken
    future: Future = Future()
    protocol._request_futures[7] = future  # as pygls keeps a request handler not started yet
    incoming(protocol, {"jsonrpc": "2.0", "method": lsp.CANCEL_REQUEST, "params": {"id": 7}})
    assert protocol.cancels == [7]
    # declined: pygls's own handling runs, which cancels the request's future
    assert future.cancelled() is not taken
    assert (7 in protocol._request_futures) is taken


def test_initialize_runs_pygls_and_lets_the_result_be_amended(protocol):
    incoming(protocol, {"jsonrpc": "2.0", "id": 1, "method": lsp.INITIALIZE, "params": {
        "processId": 42, "rootUri": "file:///work/p", "capabilities": {
            "general": {"positionEncodings": ["utf-8"]}}}})
    [answer] = protocol.sent
    assert answer["id"] == 1
    assert answer["result"]["capabilities"]["experimental"] == {"amended": 42}
    assert answer["result"]["capabilities"]["positionEncoding"] == "utf-8"
    assert protocol.workspace.root_uri == "file:///work/p"  # pygls's state is set as usual
    assert protocol.answers == [1]
