"""Stop hooks from the project's settings: blocking sends the model back once, prevent ends."""

from __future__ import annotations

import sys

from e2e import lsp
from e2e.test_turns import new_session

DONE = {"content": [{"type": "text", "text": "Done."}]}
FIXED = {"content": [{"type": "text", "text": "Fixed the lint errors."}]}


async def settings(client, workspace, script: str) -> None:
    hook = workspace / "stop_hook.py"
    hook.write_text(script)
    folder = workspace / ".heddle"
    folder.mkdir(exist_ok=True)
    (folder / "settings.toml").write_text(
        f'[[hooks.Stop]]\ncommand = "{sys.executable} {hook}"\ntimeout = 20\n')
    await lsp.trust(client, workspace)  # project hooks run once the user trusts them


BLOCK_ALWAYS = """import json, sys
payload = json.load(sys.stdin)
with open("stop_calls.jsonl", "a") as f:
    f.write(json.dumps(payload) + "\\n")
print("lint: 3 errors in app.py", file=sys.stderr)
sys.exit(2)
"""

PREVENT = """import json, sys
json.load(sys.stdin)
print(json.dumps({"continue": False, "stopReason": "the build is broken; stopping here"}))
"""


async def test_blocking_stop_hook_runs_once_per_turn(client, scripted, workspace):
    await settings(client, workspace, BLOCK_ALWAYS)
    scripted.add_scenario("s", {"steps": [DONE, FIXED]})
    sid = await new_session(client, workspace, "s")
    result = await client.call("turn/start", {"sessionId": sid, "prompt": "finish"})
    # a hook that always objects would loop forever; the flag makes it run once: 2 model calls
    assert result["reason"] == "completed" and result["text"] == "Fixed the lint errors."
    assert result["transitions"] == ["stop_hook_blocking"]
    assert len(scripted.requests_for("s")) == 2
    feedback = scripted.requests_for("s")[1].body["messages"][-1]["content"][-1]["text"]
    assert feedback == "Stop hook feedback:\n- lint: 3 errors in app.py"
    calls = (workspace / "stop_calls.jsonl").read_text().splitlines()
    assert len(calls) == 1 and '"hook_event_name": "Stop"' in calls[0]


async def test_stop_hook_can_end_the_turn(client, scripted, workspace):
    await settings(client, workspace, PREVENT)
    scripted.add_scenario("s", {"steps": [DONE]})
    sid = await new_session(client, workspace, "s")
    result = await client.call("turn/start", {"sessionId": sid, "prompt": "finish"})
    assert result["reason"] == "stopHookPrevented"
    assert result["error"]["message"] == "the build is broken; stopping here"


async def test_stop_hooks_never_run_after_an_api_error(client, scripted, workspace):
    await settings(client, workspace, BLOCK_ALWAYS)
    scripted.add_scenario("s", {"steps": [{"fault": {"status": 400}}]})
    sid = await new_session(client, workspace, "s")
    result = await client.call("turn/start", {"sessionId": sid, "prompt": "finish"})
    assert result["reason"] == "modelError"
    assert not (workspace / "stop_calls.jsonl").exists()
    assert len(scripted.requests_for("s")) == 1


STOP_TOOL = """import json, sys
event = json.load(sys.stdin)
if event["tool_name"] == "Bash":
    print(json.dumps({"continue": False, "stopReason": "no shell commands after 6 pm"}))
"""


async def test_tool_hook_can_stop_the_turn(client, scripted, workspace):
    hook = workspace / "tool_hook.py"
    hook.write_text(STOP_TOOL)
    (workspace / ".heddle").mkdir()
    (workspace / ".heddle" / "settings.toml").write_text(
        f'[[hooks.PreToolUse]]\ncommand = "{sys.executable} {hook}"\n')
    await lsp.trust(client, workspace)
    scripted.add_scenario("s", {"steps": [
        {"content": [{"type": "tool_use", "name": "Read", "input": {"path": "app.py"}},
                     {"type": "tool_use", "name": "Bash", "input": {"command": "touch ran"}}]},
        DONE, DONE]})
    sid = await new_session(client, workspace, "s", permissionMode="bypassPermissions")
    result = await client.call("turn/start", {"sessionId": sid, "prompt": "go"})
    assert result["reason"] == "hookStopped"
    assert result["error"]["message"] == "no shell commands after 6 pm"
    assert not (workspace / "ran").exists()
    assert len(scripted.requests_for("s")) == 1
    again = await client.call("turn/start", {"sessionId": sid, "prompt": "ok, continue"})
    assert again["reason"] == "completed"
    results = scripted.requests_for("s")[1].body["messages"][2]["content"]
    assert [r["is_error"] for r in results[:2]] == [False, True]
