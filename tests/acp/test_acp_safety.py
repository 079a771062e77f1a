"""The ACP door with hostile ids and titles: a session id that is no Heddle id is invalid params
before any path is made from it; permission prompts show the model's input escaped."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from acp import RequestError, text_block

from acp_harness import Recorder, agent

HOSTILE = "echo report\u202etxt.exe\x1b[2J; true\nrm -rf ~"


class Names(Recorder):
    """Keeps the names of the options offered too."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[list[str]] = []

    async def request_permission(self, session_id: str, tool_call: Any, options: list,
                                 **kw: Any):
        self.names.append([o.name for o in options])
        return await super().request_permission(session_id, tool_call, options, **kw)


@pytest.mark.timeout(120)  # a cold agent start and a turn (each 15 s and more under load)
async def test_permission_titles_and_option_names_are_escaped(scripted, daemon_env, workspace):
    scripted.add_scenario("s", {"steps": [
        {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": HOSTILE}}]},
        {"content": [{"type": "text", "text": "Rejected."}]}]})
    client = Names()
    client.answers = ["reject_once"]
    async with agent({**daemon_env, "HEDDLE_MODEL": "s"}, workspace, client) as (conn, _, _):
        session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        await asyncio.wait_for(conn.prompt(session_id=session.session_id,
                                           prompt=[text_block("go")]), 45)
    [asked] = client.permissions
    assert asked["toolCall"]["title"] == "Run: echo report\\u202etxt.exe\\x1b[2J; true"
    [names] = client.names
    escaped = "echo report\\u202etxt.exe\\x1b[2J; true\\nrm -rf ~"
    assert names == ["Allow once", f"Always allow Bash({escaped})", "Reject",
                     f"Always reject Bash({escaped})"]
    titles = [u["title"] for u in client.updates if u.get("title")]
    assert titles and all(t.isprintable() for t in titles + names)
    assert asked["toolCall"]["rawInput"]["command"] == HOSTILE  # the input is the model's


async def test_a_session_id_of_another_shape_is_invalid_params(daemon_env, workspace):
    async with agent(daemon_env, workspace) as (conn, _, _):
        for method in ("load_session", "resume_session"):
            for bad in ("../../..", "/etc/passwd", "x" * 3000):
                with pytest.raises(RequestError) as err:
                    await asyncio.wait_for(getattr(conn, method)(
                        cwd=str(workspace), session_id=bad, mcp_servers=[]), 20)
                assert err.value.code == -32602, (method, bad)
                assert "is not a Heddle session id" in str(err.value)
                assert "at `$.sessionId`" in str(err.value)
