"""Live tool output: Bash and hooks stream what they write as `toolOutput` events, bounded and
coalesced, never ahead of the control events; `toolCallFinished` says how the command ended."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

from e2e import lsp
from e2e.test_turns import new_session
from e2e.crashable import transcript_path
from e2e.test_repeats import guard_off
from heddle.rpc.output import (OUTPUT_CALL_BYTES, OUTPUT_EVENT_BYTES, OUTPUT_INTERVAL,
                               TRANSCRIPT_CALL_BYTES)
from procs import all_dead

DONE = {"content": [{"type": "text", "text": "Done."}]}
BYPASS = {"permissionMode": "bypassPermissions"}


def bash(command: str) -> dict:
    return {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": command}}]}


def wait_file(name: str) -> str:
    """Shell that waits (at most 30 s) for the test to create `name` in the workspace."""
    return f"for i in $(seq 1500); do [ -e {name} ] && break; sleep 0.02; done"


def outputs(events: list[dict]) -> list[dict]:
    return [e for e in events if e["kind"] == "toolOutput"]


async def until(condition, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.01)


def tool_result(scripted, model: str, request: int) -> dict:
    return scripted.requests_for(model)[request].body["messages"][-1]["content"][0]


async def test_output_arrives_while_the_command_runs(client, scripted, workspace):
    scripted.add_scenario("s", {"steps": [
        bash(f"echo first line; {wait_file('release')}; echo second line"), DONE]})
    sid = await new_session(client, workspace, "s", **BYPASS)
    turn = asyncio.ensure_future(client.call("turn/start", {"sessionId": sid, "prompt": "go"}))

    first = await client.wait_for_event("toolOutput", timeout=20)
    # the command is still waiting for the file: its output came before its end
    assert first["text"] == "first line\n" and first["stream"] == "combined"
    assert client.turn_events("toolCallFinished") == []
    (workspace / "release").touch()
    result = await asyncio.wait_for(turn, 20)

    assert result["reason"] == "completed"
    kinds = [e["kind"] for e in client.turn_events()]
    finished = kinds.index("toolCallFinished")
    assert all(i < finished for i, k in enumerate(kinds) if k == "toolOutput")
    shown = outputs(client.turn_events())
    assert "".join(e["text"] for e in shown) == "first line\nsecond line\n"
    assert {e["toolCallId"] for e in shown} == {client.turn_events("toolCallInput")[0]["toolCallId"]}
    end = client.turn_events("toolCallFinished")[0]
    assert (end["status"], end["summary"], end["exitCode"]) == ("ok", "exit 0", 0)
    assert "signal" not in end
    # what the model reads is the result, as before
    assert tool_result(scripted, "s", 1)["content"] == "Exit code 0\nfirst line\nsecond line\n"
    assert lsp.seqs_contiguous(client)


async def test_a_huge_output_is_bounded_and_keeps_its_tail(client, scripted, workspace,
                                                             daemon_env):
    # 20 MB, 80 times what a call may show: big enough, and cheap enough that the turn's 40 s
    # leave the daemon's start and stop room inside the test's 60 s on a loaded machine
    total = 20 * 1_000_000 + len("\nTHE-END\n")
    scripted.add_scenario("s", {"steps": [bash(
        "for i in $(seq 20); do head -c 1000000 /dev/zero | tr '\\0' a; sleep 0.02; done; "
        "echo; echo THE-END"), DONE]})
    sid = await new_session(client, workspace, "s", **BYPASS)
    started = time.monotonic()
    result = await client.call("turn/start", {"sessionId": sid, "prompt": "go"}, timeout=40)
    elapsed = time.monotonic() - started

    assert result["reason"] == "completed"
    shown = outputs(client.turn_events())
    sent = sum(len(e["text"]) for e in shown)
    # every byte is either shown or counted as left out
    assert sent + sum(e.get("elided", 0) for e in shown) == total
    assert sent <= OUTPUT_CALL_BYTES + 2 * OUTPUT_EVENT_BYTES
    assert all(len(e["text"]) <= OUTPUT_EVENT_BYTES for e in shown)
    assert len(shown) <= 2 + elapsed / OUTPUT_INTERVAL  # one per interval, and the tail
    # the tail is kept: what was shown ends with the command's last bytes (the last event may
    # hold only what came after an earlier one sent while the client was behind)
    assert "".join(e["text"] for e in shown).endswith("a" * 1000 + "\nTHE-END\n")
    assert any(e.get("elided", 0) > 0 for e in shown)
    kinds = [e["kind"] for e in client.turn_events()]
    end = kinds.index("toolCallFinished")
    assert kinds[end - 1] == "toolOutput" and "toolOutput" not in kinds[end:]  # tail, then end
    content = tool_result(scripted, "s", 1)["content"]
    assert content.startswith("Exit code 0\naaaa") and "omitted" in content
    assert "THE-END" in content and len(content) < 40_000
    # the transcript keeps the call's first output only: a load does not read megabytes
    records = [json.loads(line) for line in transcript_path(daemon_env, sid).read_text().splitlines()]
    kept = [r["event"] for r in records
            if r.get("type") == "event" and r["event"]["kind"] == "toolOutput"]
    assert kept and kept[0] == shown[0]
    assert sum(len(e["text"]) for e in kept) <= TRANSCRIPT_CALL_BYTES + OUTPUT_EVENT_BYTES
    assert len(kept) < len(shown)


FLOOD = """import os, sys, time
line = lambda tag, n: f"{tag} {n:05d} ".ljust(1023, ".") + "\\n"
n = 0
while not os.path.exists("phase2"):
    sys.stdout.write(line("p1", n)); sys.stdout.flush(); n += 1
    time.sleep(0.05)
for k in range(64):
    sys.stdout.write(line("p2", k)); sys.stdout.flush()
    time.sleep(0.02)
sys.exit(3)
"""


async def test_control_events_never_wait_behind_output(daemon_env, scripted, workspace):
    """The editor stops reading (another session's long reply fills its pipe) while a command
    writes; what it writes meanwhile is not queued for the editor: when it reads again, the
    call's end follows after only the call's last 16 KiB, the middle counted as left out."""
    from bench.daemon import Daemon

    (workspace / "flood.py").write_text(FLOOD)
    scripted.add_scenario("s", {"steps": [bash(f"{sys.executable} flood.py"), DONE]})
    # the other session talks far more than the pipe and the daemon's buffer hold
    scripted.add_scenario("long", {"repeat": True, "steps": [{"chunk": 4096, "content": [
        {"type": "text", "text": "word " * 6000},
        {"type": "tool_use", "name": "Read", "input": {"path": "app.py"}}]}]})
    guard_off(daemon_env)  # the same call again and again is the point here
    log = Path(daemon_env["HEDDLE_LOG_FILE"])
    daemon = await Daemon.spawn(daemon_env, workspace, workspace.parent / "stderr.log")
    try:
        await daemon.initialize()
        session, other = [await daemon.new_session(workspace, m) for m in ("s", "long")]
        _, done = daemon.start_turn(session, "flood")
        await until(lambda: any(e.kind == "toolOutput" for e in daemon.events))
        daemon.pause_reading()
        _, other_done = daemon.send_request("turn/start", {
            "sessionId": other, "prompt": "talk", "maxTurns": 40})
        await until(lambda: log.exists() and "the client is behind" in log.read_text(), 30)
        (workspace / "phase2").touch()  # what the command writes from now on waits for us
        # this turn's end (the other session's turn never completes: it always wants a tool)
        await until(lambda: "ended: completed" in log.read_text(), 30)
        daemon.resume_reading()
        result, _ = await asyncio.wait_for(done, 30)
        await asyncio.wait_for(other_done, 30)  # how it ends is not this test's business
    finally:
        await daemon.shutdown()

    assert result["reason"] == "completed"
    events = [e.params["event"] for e in daemon.events if e.turn == result["turnId"]]
    kinds = [e["kind"] for e in events]
    end = kinds.index("toolCallFinished")
    assert events[end]["status"] == "error" and events[end]["exitCode"] == 3
    assert "toolOutput" not in kinds[end:]
    late = [e for e in outputs(events) if "p2 " in e["text"]]
    assert len(late) == 1 and late[0] is events[end - 1]  # only the tail, just before the end
    shown = {int(part.split()[0]) for part in late[0]["text"].split("p2 ")[1:]}
    assert max(shown) == 63 and len(shown) <= OUTPUT_EVENT_BYTES // 1024 + 1
    assert late[0]["elided"] > 0


HOOK = """import json, os, sys, time
call = json.load(sys.stdin)
if call["tool_input"]["path"].endswith("flood.txt"):
    n = 0
    while not os.path.exists("release"):
        print(f"checking {n}", file=sys.stderr, flush=True); n += 1
        open("flooding", "w").close()
        time.sleep(0.01)
    print("{}")
else:
    for _ in range(1500):  # ask once the other hook floods
        if os.path.exists("flooding"):
            break
        time.sleep(0.02)
    print(json.dumps({"decision": "ask", "reason": "the hook wants you to see this"}))
"""


async def test_a_permission_request_arrives_while_a_hook_floods(client, scripted, workspace):
    (workspace / "flood.txt").write_text("flood\n")
    (workspace / "hook.py").write_text(HOOK)
    (workspace / ".heddle").mkdir()
    (workspace / ".heddle" / "settings.toml").write_text(
        f'[[hooks.PreToolUse]]\nmatcher = "Read"\ncommand = "{sys.executable} hook.py"\n')
    await lsp.trust(client, workspace)
    scripted.add_scenario("s", {"steps": [
        {"content": [{"type": "tool_use", "name": "Read", "input": {"path": "flood.txt"}},
                     {"type": "tool_use", "name": "Read", "input": {"path": "app.py"}}]},
        DONE]})
    seen: dict[str, int] = {}

    def flooded() -> list[dict]:
        return [e for e in outputs(client.turn_events()) if e["text"].startswith("checking")
                or "\nchecking" in e["text"]]

    async def answer(params):
        seen["asked"] = len(flooded())
        # the hook still floods: its output keeps coming while the question is open
        await until(lambda: len(flooded()) >= seen["asked"] + 3)
        assert "toolCallFinished" not in [e["kind"] for e in client.turn_events()]
        (workspace / "release").touch()
        return {"decision": "allowOnce"}

    client.answer = answer
    sid = await new_session(client, workspace, "s")
    result = await client.call("turn/start", {"sessionId": sid, "prompt": "go"}, timeout=40)

    assert result["reason"] == "completed"
    assert len(client.permission_requests) == 1
    flood_call, app_call = [e["toolCallId"] for e in client.turn_events("toolCallInput")]
    assert client.permission_requests[0]["toolCallId"] == app_call
    events = client.turn_events()
    asked = next(i for i, e in enumerate(events) if e["kind"] == "permissionAsked")
    after = [e for e in outputs(events[asked:]) if e["toolCallId"] == flood_call]
    assert {(e["hook"], e["stream"]) for e in after} == {("PreToolUse", "stderr"),
                                                         ("PreToolUse", "stdout")}
    assert [e["text"] for e in after if e["stream"] == "stdout"] == ["{}\n"]
    assert [f["status"] for f in client.turn_events("toolCallFinished")] == ["ok", "ok"]


async def test_exit_code_and_signal_make_the_status(client, scripted, workspace):
    scripted.add_scenario("s", {"steps": [
        bash("echo oops >&2; exit 3"), bash("echo bye; kill -KILL $$"), DONE]})
    sid = await new_session(client, workspace, "s", **BYPASS)
    result = await client.call("turn/start", {"sessionId": sid, "prompt": "go"})

    assert result["reason"] == "completed"
    failed, killed = client.turn_events("toolCallFinished")
    assert (failed["status"], failed["summary"], failed["exitCode"]) == ("error", "exit 3", 3)
    assert "signal" not in failed
    assert (killed["status"], killed["summary"], killed["signal"]) == (
        "error", "killed by SIGKILL", "SIGKILL")
    assert "exitCode" not in killed
    # the model reads what it always read: the exit status in the text
    first = tool_result(scripted, "s", 1)
    assert (first["content"], first.get("is_error", False)) == ("Exit code 3\noops\n", False)
    assert tool_result(scripted, "s", 2)["content"] == "Exit code -9\nbye\n"


async def test_split_utf8_and_binary_output(client, scripted, workspace):
    scripted.add_scenario("s", {"steps": [bash(
        f"printf 'caf\\xc3'; {wait_file('go')}; printf '\\xa9 \\xe2\\x82'; sleep 0.3; "
        "printf '\\xac\\nbin:\\xff\\xfe\\x00end\\n'"), DONE]})
    sid = await new_session(client, workspace, "s", **BYPASS)
    turn = asyncio.ensure_future(client.call("turn/start", {"sessionId": sid, "prompt": "go"}))
    first = await client.wait_for_event("toolOutput", timeout=20)
    assert first["text"] == "caf"  # the first byte of é waits for the rest
    (workspace / "go").touch()
    assert (await asyncio.wait_for(turn, 20))["reason"] == "completed"

    text = "".join(e["text"] for e in outputs(client.turn_events()))
    assert text == "café €\nbin:\ufffd\ufffd\x00end\n"


async def test_cancel_mid_output_closes_the_call(client, scripted, workspace):
    scripted.add_scenario("s", {"steps": [
        bash("echo $$ > shell.pid; while true; do echo tick; sleep 0.01; done"), DONE]})
    sid = await new_session(client, workspace, "s", **BYPASS)
    turn = asyncio.ensure_future(client.call("turn/start", {"sessionId": sid, "prompt": "go"}))
    await until(lambda: len(outputs(client.turn_events())) >= 2)
    client.protocol.notify("turn/cancel", {"sessionId": sid})
    result = await asyncio.wait_for(turn, 20)

    assert (result["reason"], result["cancelPhase"]) == ("cancelled", "tools")
    assert await all_dead([int((workspace / "shell.pid").read_text())])
    events = client.turn_events()
    kinds = [e["kind"] for e in events]
    end = kinds.index("toolCallFinished")
    assert events[end]["status"] == "cancelled"
    assert "toolOutput" not in kinds[end:] and kinds[-1] == "turnEnded"
    assert "tick\n" in "".join(e["text"] for e in outputs(events))


SUB_HOOK = """import json, sys
json.load(sys.stdin)
print("hook looked at it", file=sys.stderr)
"""


async def test_a_sub_agents_hook_output_is_nested_under_its_task(client, scripted, workspace):
    (workspace / "hook.py").write_text(SUB_HOOK)
    (workspace / ".heddle").mkdir()
    (workspace / ".heddle" / "settings.toml").write_text(
        f'[[hooks.PreToolUse]]\nmatcher = "Grep"\ncommand = "{sys.executable} hook.py"\n')
    await lsp.trust(client, workspace)
    scripted.add_scenario("m", {"steps": [
        {"content": [{"type": "tool_use", "name": "Task", "input": {
            "description": "find greet", "prompt": "Find where greet is defined"}}]},
        {"match": {"lastUserContains": "Find where greet is defined"},
         "content": [{"type": "tool_use", "name": "Grep", "input": {"pattern": "def greet"}}]},
        {"match": {"lastUserContains": "app.py:1:def greet"},
         "content": [{"type": "text", "text": "In app.py."}]},
        DONE]})
    sid = await new_session(client, workspace, "m")
    result = await client.call("turn/start", {"sessionId": sid, "prompt": "where?"})

    assert result["reason"] == "completed"
    task = client.turn_events("toolCallInput")[0]["toolCallId"]
    nested = [n for n in client.turn_events("agent") if n["toolCallId"] == task]
    kinds = [n["event"]["kind"] for n in nested]
    assert kinds[:2] == ["toolCallStarted", "toolCallInput"] and kinds[-1] == "toolCallFinished"
    shown = [n["event"] for n in nested[2:-1]]
    assert shown and {e["kind"] for e in shown} == {"toolOutput"}, shown
    assert "".join(e["text"] for e in shown) == "hook looked at it\n"
    assert {(e["stream"], e["hook"], e["toolCallId"]) for e in shown} == {
        ("stderr", "PreToolUse", nested[0]["event"]["toolCallId"])}
