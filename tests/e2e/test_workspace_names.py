"""Files whose names are not UTF-8 (any byte but `/` and NUL may be in a name): the tools that
list and search the workspace report them, and the turn, the editor's events, the transcript
and a later load all go on."""

from __future__ import annotations

import os

from e2e.test_permissions import DONE, statuses, tool
from e2e.test_turns import new_session


def content_text(result: dict) -> str:
    content = result["content"]
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)


async def test_names_that_are_not_utf8_are_listed_and_the_session_goes_on(
        client, scripted, workspace):
    root = os.fsencode(workspace)
    for name in (b"caf\xe9.txt", b"\xff\xfe.py", b"ok.txt"):
        with open(os.path.join(root, name), "wb") as f:
            f.write(b"needle\n")
    os.mkdir(os.path.join(root, b"dir\x80"))
    scripted.add_scenario("names", {"steps": [
        {"content": [tool("LS", path=str(workspace)), tool("Glob", pattern="*"),
                     tool("Grep", pattern="needle", output_mode="files_with_matches")]},
        DONE, DONE]})
    sid = await new_session(client, workspace, "names", permissionMode="bypassPermissions")
    result = await client.call("turn/start", {"sessionId": sid, "prompt": "look"}, timeout=40)

    assert result["reason"] == "completed"
    assert statuses(client) == ["ok", "ok", "ok"]
    sent = scripted.requests_for("names")[1].body["messages"][-1]["content"]
    ls, glob, grep = (content_text(b) for b in sent if b["type"] == "tool_result")
    # each name is shown, its undecodable bytes as U+FFFD
    assert {"caf\ufffd.txt  (7 B)", "\ufffd\ufffd.py  (7 B)", "ok.txt  (7 B)",
            "dir\ufffd/"} <= set(ls.splitlines())
    for found in (glob, grep):
        assert "caf\ufffd.txt" in found and "ok.txt" in found, found

    loaded = await client.call("session/load", {"sessionId": sid})  # the transcript reads back
    assert loaded["turns"] == 1
    again = await client.call("turn/start", {"sessionId": sid, "prompt": "and?"}, timeout=40)
    assert again["reason"] == "completed"
