"""Cancel at random points of scripted turns: the next request the model gets is always valid."""

from __future__ import annotations

import asyncio
import random

from e2e.test_turns import new_session

WORK = {"content": [
    {"type": "thinking", "thinking": "Plan: read, then check.", "signature": "sig"},
    {"type": "text", "text": "Reading the file, then running a check. "},
    {"type": "tool_use", "name": "Read", "input": {"path": "app.py"}},
    {"type": "tool_use", "name": "Grep", "input": {"pattern": "greet"}},
    {"type": "tool_use", "name": "Bash", "input": {"command": "sleep 0.3; echo checked"}}],
    "chunk": 6, "delayMs": 8}
ANSWER = {"content": [{"type": "text", "text": "All good: " + "fine " * 40}], "chunk": 6, "delayMs": 8}


async def test_random_cancel_points_keep_the_conversation_valid(client, scripted, workspace):
    seed = random.randrange(1 << 30)
    rand = random.Random(seed)
    scripted.add_scenario("s", {"steps": [WORK, ANSWER], "repeat": True})
    sid = await new_session(client, workspace, "s", permissionMode="bypassPermissions")
    reasons = []
    for attempt in range(8):
        started = asyncio.ensure_future(client.call(
            "turn/start", {"sessionId": sid, "prompt": f"attempt {attempt}"}, timeout=30))
        await asyncio.sleep(rand.uniform(0.0, 1.2))
        client.protocol.notify("turn/cancel", {"sessionId": sid})
        result = await asyncio.wait_for(started, 15)
        reasons.append((result["reason"], result.get("cancelPhase")))
        assert result["reason"] in ("cancelled", "completed"), (seed, result)
    final = await client.call("turn/start", {"sessionId": sid, "prompt": "finish"}, timeout=30)
    assert final["reason"] == "completed", (seed, final)
    rejected = [r for r in scripted.requests_for("s") if r.status not in (0, 200)]
    assert rejected == [], f"seed {seed}: invalid requests {[r.body for r in rejected]}"
    assert any(phase == "streaming" for _, phase in reasons) or any(
        phase == "tools" for _, phase in reasons), (seed, reasons)
