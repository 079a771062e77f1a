"""One session, one daemon: a session live in one Heddle (an editor window, `heddle ask`) cannot
be loaded by another until it is closed there or that daemon ends, so two never append to one
transcript and none repairs a turn the other still runs."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from heddle.client import RpcError

LONG = {"content": [{"type": "text", "text": "word " * 400}], "chunk": 5, "delayMs": 50}
DONE = {"content": [{"type": "text", "text": "Done."}]}


async def test_a_session_live_in_one_daemon_is_refused_by_another_until_it_is_closed(
        daemons, scripted, workspace):
    scripted.add_scenario("lock", {"steps": [LONG, DONE, DONE]})
    one, two = await daemons(), await daemons()
    sid = (await one.call("session/new", {"workspace": str(workspace), "model": "lock"}))[
        "sessionId"]
    running = asyncio.ensure_future(one.call("turn/start", {"sessionId": sid, "prompt": "go"},
                                             timeout=40))
    await one.wait_for("textDelta")

    with pytest.raises(RpcError) as err:
        await two.call("session/load", {"sessionId": sid})
    assert err.value.code == -32016 and "open in another Heddle" in str(err.value)
    listed = (await two.call("session/list", {"workspace": str(workspace)}))["sessions"]
    assert [(s["sessionId"], s["live"]) for s in listed] == [(sid, False)]

    await one.call("session/close", {"sessionId": sid})
    assert (await running)["reason"] == "cancelled"
    loaded = await two.call("session/load", {"sessionId": sid})  # closed there: it loads here
    assert loaded["turns"] == 1
    assert (await two.call("turn/start", {"sessionId": sid, "prompt": "on"},
                           timeout=40))["reason"] == "completed"
    # and now the first daemon is the other one: refused there, until the second ends
    with pytest.raises(RpcError) as err:
        await one.call("session/load", {"sessionId": sid})
    assert err.value.code == -32016
    await two.kill()
    assert (await one.call("session/load", {"sessionId": sid}))["turns"] == 2
    assert (await one.call("turn/start", {"sessionId": sid, "prompt": "again"},
                           timeout=40))["reason"] == "completed"


async def test_a_load_waits_a_moment_for_the_process_that_lets_the_session_go(
        daemons, scripted, workspace):
    # a reloaded window's daemon is still exiting while the new window's loads the session
    scripted.add_scenario("handover", {"steps": [DONE, DONE]})
    old, new = await daemons(), await daemons()
    sid = (await old.call("session/new", {"workspace": str(workspace), "model": "handover"}))[
        "sessionId"]
    await old.call("turn/start", {"sessionId": sid, "prompt": "go"}, timeout=40)
    loading = asyncio.ensure_future(new.call("session/load", {"sessionId": sid}))
    await asyncio.sleep(0.5)
    assert not loading.done()  # waiting for the lock, not refused
    await old.stop()
    assert (await loading)["turns"] == 1
    assert (await new.call("turn/start", {"sessionId": sid, "prompt": "on"},
                           timeout=40))["reason"] == "completed"


async def test_an_unknown_session_is_refused_at_once_while_a_held_one_waits(
        daemons, scripted, workspace, daemon_env):
    scripted.add_scenario("held", {"steps": [DONE]})
    one, two = await daemons(), await daemons()
    sid = (await one.call("session/new", {"workspace": str(workspace), "model": "held"}))[
        "sessionId"]
    await one.call("turn/start", {"sessionId": sid, "prompt": "go"}, timeout=40)
    log = Path(daemon_env["HEDDLE_LOG_FILE"])
    waiting = f"waiting for another process to release session {sid}"
    assert waiting not in log.read_text()
    held = asyncio.ensure_future(two.call("session/load", {"sessionId": sid}))
    for _ in range(1500):  # 30 s: the load waits for `one` to let the session go
        if waiting in log.read_text():
            break
        assert not held.done()
        await asyncio.sleep(0.02)

    unknown = "0" * 32
    with pytest.raises(RpcError) as err:
        await two.call("session/load", {"sessionId": unknown})
    assert err.value.code == -32010 and f"no session '{unknown}'" in str(err.value)
    assert not held.done()  # answered while the held one is still waiting: no wait of its own
    assert f"release session {unknown}" not in log.read_text()
    await one.call("session/close", {"sessionId": sid})  # at once: the held load waits 3 s at most
    assert (await held)["turns"] == 1
