"""Titles of tool calls and permission prompts are made from input the model invents: a newline
or a bidi override (U+202E) in it reaches the editor escaped, on one line."""

from __future__ import annotations

from e2e.test_permissions import statuses, steps, tool
from e2e.test_turns import new_session

HOSTILE = "report\u202etxt.exe\nAllowed: yes\x1b[2J\u2028\u200b"
"""A bidi override (shows `exe.txt`), a newline faking a second line, a terminal escape, a line
separator and a zero-width space."""


async def test_titles_escape_newlines_bidi_overrides_and_terminal_escapes(client, scripted,
                                                                           workspace):
    client.answer = lambda params: {"decision": "reject"}
    scripted.add_scenario("s", steps(tool("Write", path=HOSTILE, content="x"),
                                     tool("Bash", command=f"echo {HOSTILE}"),
                                     tool("Grep", pattern=HOSTILE),
                                     tool("Grep", pattern="x" * 1000)))
    sid = await new_session(client, workspace, "s")

    result = await client.call("turn/start", {"sessionId": sid, "prompt": "go"}, timeout=45)

    assert result["reason"] == "completed"
    assert statuses(client)[:2] == ["rejected", "rejected"]  # (Grep ran: no prompt)
    escaped = "report\\u202etxt.exe\\nAllowed: yes\\x1b[2J\\u2028\\u200b"
    asked = [r["title"] for r in client.permission_requests]
    assert asked == [f"Write {escaped}", "Run: echo report\\u202etxt.exe"]
    shown = [e["title"] for e in client.turn_events("toolCallInput")]
    assert shown[:3] == [f"Write {escaped}", "Run: echo report\\u202etxt.exe",
                         f'Search "{escaped}" in .']
    assert len(shown[3]) == 500 and shown[3].startswith('Search "xxx') and shown[3][-1] == "…"
    assert [e["title"] for e in client.turn_events("permissionAsked")] == asked
    assert all(t.isprintable() for t in asked + shown)
    # the input itself is the model's, untouched: the tool gets exactly what was sent
    assert client.permission_requests[0]["input"]["path"].endswith(HOSTILE)
    assert client.permission_requests[1]["input"]["command"] == f"echo {HOSTILE}"
