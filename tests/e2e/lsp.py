"""A pytest-lsp client for the daemon: raw-dict params, collected events, scripted answers."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any, Callable

from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import register_lsp_features

from heddle.rpc.pygls_adapter import converter

Answer = Callable[[dict], Any]


class HeddleTestClient(LanguageClient):
    events: list[dict]
    permission_requests: list[dict]
    mcp_changes: list[dict]
    """The `mcpServer/changed` notifications, in order."""
    answer: Answer

    def turn_events(self, kind: str | None = None) -> list[dict]:
        return [e["event"] for e in self.events if kind is None or e["event"]["kind"] == kind]

    async def wait_for_event(self, kind: str, timeout: float = 30.0) -> dict:
        # 30 s: a fresh daemon's first model call waits for the SDK's warm-up (seconds under load)
        async def poll():
            while True:
                found = self.turn_events(kind)
                if found:
                    return found[0]
                await asyncio.sleep(0.01)
        return await asyncio.wait_for(poll(), timeout)

    async def mcp_change(self, index: int, timeout: float = 30.0) -> dict:
        """The `index`th `mcpServer/changed` (from 0), once it has come."""
        async def poll():
            while len(self.mcp_changes) <= index:
                await asyncio.sleep(0.01)
            return self.mcp_changes[index]
        return await asyncio.wait_for(poll(), timeout)

    async def call(self, method: str, params: Any, timeout: float = 20.0, msg_id=None) -> Any:
        return await asyncio.wait_for(
            self.protocol.send_request_async(method, params, msg_id=msg_id), timeout)


def make_client() -> HeddleTestClient:
    client = HeddleTestClient(converter_factory=converter)
    register_lsp_features(client)
    client.events = []
    client.permission_requests = []
    client.mcp_changes = []
    client.answer = lambda params: {"decision": "allowOnce"}

    @client.feature("turn/event")
    def on_event(params):
        client.events.append(params)

    @client.feature("mcpServer/changed")
    def on_mcp_change(params):
        client.mcp_changes.append(params)

    @client.feature("permission/request")
    async def on_permission(params):
        client.permission_requests.append(params)
        result = client.answer(params)
        if asyncio.iscoroutine(result):
            result = await result
        return result

    return client


async def start(env: dict[str, str], command: list[str], permission_requests: bool = True
                ) -> HeddleTestClient:
    config = ClientServerConfig(server_command=command, client_factory=make_client,
                                server_env=env)
    client = await config.start()
    caps = lsp.ClientCapabilities(experimental={"heddle": {"permissionRequests": permission_requests}})
    await asyncio.wait_for(client.initialize_session(lsp.InitializeParams(capabilities=caps)), 20)
    return client


async def stop(client: HeddleTestClient) -> None:
    try:
        await asyncio.wait_for(client.shutdown_session(), 10)
    finally:
        await client.stop()


def seqs_contiguous(client: HeddleTestClient) -> bool:
    by_turn: dict[str, list[int]] = defaultdict(list)
    for e in client.events:
        by_turn[e["turnId"]].append(e["seq"])
    return all(s == list(range(len(s))) for s in by_turn.values())


async def trust(client: HeddleTestClient, workspace) -> dict:
    """Trust the workspace's project settings as they are now (`workspace/trust`)."""
    return await client.call("workspace/trust", {"workspace": str(workspace)})
