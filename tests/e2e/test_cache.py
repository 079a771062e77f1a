"""Prompt caching through the daemon, measured by the scripted model's cache accounting (which
follows the Messages API's rules): which prefix each call reads, and how much."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from e2e import lsp
from e2e.test_turns import new_session
from e2e.test_repeats import guard_off
from heddle.scripted import ScriptedServer
from heddle.scripted.context_edits import apply_edits
from heddle.scripted.prompt import build_prompt
from heddle.sessions.agents import AGENT_SYSTEM

AGENT_ROLE = AGENT_SYSTEM.split("{")[0]
"""How a sub-agent's system prompt starts."""

READ_BIG = {"content": [{"type": "text", "text": "Reading."},
                        {"type": "tool_use", "name": "Read", "input": {"path": "big.txt"}}]}
DONE = {"content": [{"type": "text", "text": "Done."}]}


def big_file(workspace, lines: int = 120) -> None:
    (workspace / "big.txt").write_text("".join(f"line {i}: " + "data " * 14 + "\n"
                                               for i in range(lines)))


def parallel_reads(n: int, thinking: bool = False) -> dict:
    head = [{"type": "thinking", "thinking": "Read them all at once.", "signature": "s1"}]
    return {"content": (head if thinking else []) + [
        {"type": "tool_use", "name": "Read", "input": {"path": "app.py"}}] * n}


def through_last_block(body: dict) -> int:
    """Tokens of a request's prompt as the model saw it, through its last block."""
    if "context_management" in body:
        body, _ = apply_edits(body)
    prompt = build_prompt(body)
    return prompt.tokens_at(len(prompt.blocks) - 1)


def stable_tokens(body: dict) -> int:
    """Tokens of tools + system."""
    return build_prompt({"tools": body.get("tools"), "system": body["system"],
                         "messages": []}).tokens_at(-1 if not body.get("system") else
                                                     len(body.get("tools", [])))


def breaks(requests) -> list[int]:
    """Requests (after the first) that did not read the whole prompt of the one before."""
    return [k for k in range(1, len(requests))
            if requests[k].cache.read_tokens < through_last_block(requests[k - 1].body)]


def read_share(requests) -> float:
    """Share of input tokens read from the cache, over the requests after the first."""
    read = sum(r.cache.read_tokens for r in requests[1:])
    total = sum(r.cache.read_tokens + r.cache.creation_tokens + r.cache.input_tokens
                for r in requests[1:])
    return read / total


def _clean(value):
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _extends(earlier, later) -> bool:
    before = _clean(earlier.body["messages"])
    return _clean(later.body["messages"])[:len(before)] == before


def stable_parts(requests) -> set[str]:
    return {json.dumps([r.body.get("tools"), r.body.get("system")]) for r in requests}


async def test_every_call_reads_the_previous_calls_prompt(client, scripted: ScriptedServer,
                                                          workspace):
    big_file(workspace)
    scripted.add_scenario("s", {"steps": [READ_BIG, parallel_reads(25), READ_BIG, DONE,
                                          READ_BIG, DONE]})
    sid = await new_session(client, workspace, "s", permissionMode="bypassPermissions")
    first = await client.call("turn/start", {"sessionId": sid, "prompt": "Read big.txt"})
    second = await client.call("turn/start", {"sessionId": sid, "prompt": "Once more"})
    assert (first["reason"], second["reason"]) == ("completed", "completed")
    requests = scripted.requests_for("s")
    assert [r.status for r in requests] == [200] * 6
    # tools and system prompt are byte-identical in every call, within and across turns
    assert len(stable_parts(requests)) == 1
    assert requests[0].cache.read_tokens == 0
    assert requests[0].cache.creation_tokens >= stable_tokens(requests[0].body) >= 1024
    # each call reads all the previous one sent: also after 25 parallel results, and the
    # first call of the second turn
    assert breaks(requests) == []
    assert all(len(r.cache.breakpoints) <= 4 for r in requests)
    # the turn results report what the model reported
    for result, calls in ((first, requests[:4]), (second, requests[4:])):
        usage = result["usage"]
        assert usage["cacheReadInputTokens"] == sum(r.cache.read_tokens for r in calls)
        assert usage["cacheCreationInputTokens"] == sum(r.cache.creation_tokens for r in calls)
        assert usage["inputTokens"] == sum(r.cache.input_tokens for r in calls)
    assert client.turn_events("usage")[-1]["usage"] == second["usage"]
    assert client.turn_events("turnEnded")[-1]["usage"] == second["usage"]


@pytest.mark.parametrize("name, api_model, options", [
    ("t", None, {"thinkingBudget": 2048}),
    # thinking on by default, as each model takes it: a budget, adaptive
    ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5", {}),
    ("claude-opus-4-7", "claude-opus-4-7", {})])
async def test_a_new_turn_after_thinking_reads_up_to_the_stripped_thinking(
        client, scripted: ScriptedServer, workspace, name, api_model, options):
    thought = {"content": [{"type": "thinking", "thinking": "All read.", "signature": "s2"},
                           {"type": "text", "text": "Done."}]}
    read_big = {"content": [{"type": "thinking", "thinking": "Now big.txt.", "signature": "s3"},
                            *READ_BIG["content"]]}  # thinking is on: every reply starts with it
    scripted.add_scenario(name, {"steps": [parallel_reads(25, thinking=True), thought,
                                           read_big, DONE],
                                 **({"apiModel": api_model} if api_model else {})})
    big_file(workspace)
    sid = await new_session(client, workspace, name, permissionMode="bypassPermissions",
                            **options)
    await client.call("turn/start", {"sessionId": sid, "prompt": "Read app.py " * 200})
    await client.call("turn/start", {"sessionId": sid, "prompt": "And big.txt"})
    requests = scripted.requests_for(name)
    assert [r.status for r in requests] == [200] * 4
    assert len({str(r.body["thinking"]) for r in requests}) == 1  # the same in every call
    assert breaks(requests[:2]) == []  # the thinking of the running turn stays in the prefix
    # The API strips the first turn's thinking: the prefix through the first prompt is what
    # still matches, and the new turn reads it rather than only tools + system
    first = requests[2].body["messages"][0]["content"]  # the briefing, then the prompt
    assert first[-1]["text"].startswith("Read app.py")
    assert requests[2].cache.read_location == f"messages.0.content.{len(first) - 1}"
    assert requests[2].cache.read_tokens > stable_tokens(requests[2].body) + 500
    assert breaks(requests[2:]) == []


async def test_a_sub_agent_caches_its_own_prefix(client, scripted: ScriptedServer, workspace):
    big_file(workspace)
    task = {"content": [{"type": "tool_use", "name": "Task", "input": {
        "description": "read big", "prompt": "Read big.txt twice and report."}}]}
    report = {"content": [{"type": "text", "text": "big.txt has 120 lines."}]}
    scripted.add_scenario("a", {"steps": [task, READ_BIG, READ_BIG, READ_BIG, report, DONE]})
    sid = await new_session(client, workspace, "a", permissionMode="bypassPermissions")
    result = await client.call("turn/start", {"sessionId": sid, "prompt": "Use a sub-agent"})
    assert result["reason"] == "completed"
    requests = scripted.requests_for("a")
    sub = [r for r in requests if r.body["system"][0]["text"].startswith(AGENT_ROLE)]
    main = [r for r in requests if r not in sub]
    assert (len(main), len(sub)) == (2, 4)
    assert len(stable_parts(main)) == 1 and len(stable_parts(sub)) == 1
    assert breaks(main) == []
    # (its tools, system prompt and briefing are over the 1024-token minimum): from its
    # second call on, each call reads the one before
    assert breaks(sub[1:]) == []


async def test_after_a_compaction_one_call_rewrites_then_all_read(daemon_env, daemon_command,
                                                                  scripted, workspace):
    talk = {"content": [{"type": "text", "text": "Thinking out loud about the code. " * 60},
                        {"type": "tool_use", "name": "Grep", "input": {"pattern": "greet"}}]}
    window = 45_000  # auto-compact at about 12,000 estimated tokens
    scripted.add_scenario("chatty", {"contextWindow": window, "repeat": True, "steps": [talk]})
    scripted.add_scenario("summ", {"repeat": True, "steps": [
        {"content": [{"type": "text", "text": "Goal: keep searching for greet."}]}]})
    guard_off(daemon_env)  # the same call again and again is the point here
    env = dict(daemon_env, HEDDLE_CONTEXT_WINDOW=str(window))
    c = await lsp.start(env, daemon_command)
    try:
        sid = await new_session(c, workspace, "chatty", compactModel="summ",
                                permissionMode="bypassPermissions")
        result = await c.call("turn/start", {"sessionId": sid, "prompt": "search for greet",
                                             "maxTurns": 40}, timeout=50)
    finally:
        await lsp.stop(c)
    assert result["reason"] == "maxTurns"
    compactions = [e for e in c.turn_events("compaction") if e["layer"] in ("collapse", "auto")]
    assert compactions
    requests = scripted.requests_for("chatty")
    assert [r.status for r in requests] == [200] * 40
    # the calls whose messages do not start with the previous call's: right after a compaction
    after = [k for k in range(1, len(requests)) if not _extends(requests[k - 1], requests[k])]
    assert 1 <= len(after) <= len(compactions)
    assert all("Goal: keep searching for greet." in json.dumps(requests[k].body["messages"][:2])
               for k in after)
    # exactly the first call after each compaction re-writes (what changed of) the messages,
    # still reading tools + system; every other call reads the whole prompt of the one before
    assert breaks(requests) == after
    assert all(requests[k].cache.read_tokens >= stable_tokens(requests[k].body) for k in after)
    # the summary calls send the session's own tools and system prompt, so they read the
    # conversation they summarise from the cache (here the models share it: no apiModel);
    # an auto-compaction right after a collapse summarises messages never sent before
    summaries = scripted.requests_for("summ")
    assert summaries and stable_parts(summaries) == stable_parts(requests)
    shares = [r.cache.read_tokens / (r.cache.read_tokens + r.cache.creation_tokens
                                     + r.cache.input_tokens) for r in summaries]
    assert max(shares) >= 0.9
    assert all(r.cache.read_tokens >= stable_tokens(r.body) for r in summaries)


async def _long_session(env, daemon_command, scripted, workspace, name: str, calls: int):
    big_file(workspace, lines=24)  # about 2.3 KB a read
    window = 60_000  # microcompact from about 20,000 estimated tokens
    scripted.add_scenario(name, {"contextWindow": window, "repeat": True, "steps": [READ_BIG]})
    guard_off(env)  # the same call again and again is the point here
    c = await lsp.start(dict(env, HEDDLE_CONTEXT_WINDOW=str(window)), daemon_command)
    try:
        sid = await new_session(c, workspace, name, permissionMode="bypassPermissions")
        result = await c.call("turn/start", {"sessionId": sid, "prompt": "read big.txt",
                                             "maxTurns": calls}, timeout=55)
    finally:
        await lsp.stop(c)
    assert result["reason"] == "maxTurns"
    requests = scripted.requests_for(name)
    assert [r.status for r in requests] == [200] * calls
    return c, requests


async def test_clearing_old_tool_results_happens_in_batches(daemon_env, daemon_command,
                                                            scripted, workspace):
    c, requests = await _long_session(daemon_env, daemon_command, scripted, workspace, "mc", 150)
    cleared = [e for e in c.turn_events("compaction") if e["layer"] == "microcompact"]
    assert 2 <= len(cleared) <= 150 // 8  # in batches, not at every call past the trigger
    assert len(breaks(requests)) == len(cleared)
    assert all(r.cache.read_tokens >= stable_tokens(r.body) for r in requests[1:])
    assert read_share(requests) >= 0.85


async def test_context_editing_clears_old_results_on_the_server(daemon_env, daemon_command,
                                                                scripted, workspace):
    env = dict(daemon_env, HEDDLE_CONTEXT_EDITING="1")
    c, requests = await _long_session(env, daemon_command, scripted, workspace, "ce", 150)
    edited = [r for r in requests if "context_management" in r.body]
    assert edited and all(r.headers["anthropic-beta"] == "context-management-2025-06-27"
                          for r in edited)
    freed = [sum(e["cleared_input_tokens"] for e in r.context_management["applied_edits"])
             for r in edited]
    assert all(f > 0 for f in freed)
    # the daemon keeps the whole history: the first result is still sent in full
    assert "line 23:" in requests[-1].body["messages"][2]["content"][0]["content"]
    assert not [e for e in c.turn_events("compaction") if e["layer"] == "microcompact"]
    changes = len({json.dumps(r.body.get("context_management")) for r in edited})
    assert len(breaks(requests)) <= changes + 1  # the clearing moves in a few batches
    assert read_share(requests) >= 0.85
    usage = c.turn_events("usage")[-1]
    assert usage["contextTokens"] < 37_000  # the cleared results are not counted


def test_heddle_ask_shows_the_tokens_and_the_share_read_from_cache(daemon_env, scripted,
                                                                   workspace):
    big_file(workspace)
    scripted.add_scenario("ask", {"steps": [READ_BIG, READ_BIG, DONE]})
    run = subprocess.run([str(Path(sys.executable).with_name("heddle")), "ask", "-w",
                          str(workspace), "-m", "ask", "read big.txt"], env=daemon_env,
                         capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stderr
    caches = [r.cache for r in scripted.requests_for("ask")]
    read = sum(c.read_tokens for c in caches)
    total = read + sum(c.creation_tokens + c.input_tokens for c in caches)
    line = run.stderr.strip().splitlines()[-1]
    assert line.startswith(f"[completed · 3 model calls · {total} in "
                           f"({read / total:.0%} from cache) / "), line
    assert read > 0


@pytest.mark.parametrize("env, toml, ttl", [
    ({"HEDDLE_PROMPT_CACHE": "0"}, "", None),
    ({}, "[cache]\nprompt_cache = false\n", None),
    ({"HEDDLE_PROMPT_CACHE_TTL": "1h"}, "", "1h"),
    ({"HEDDLE_PROMPT_CACHE": "0"}, "[cache]\nprompt_cache = true\nttl = \"1h\"\n", "1h")])
async def test_caching_off_or_for_an_hour_by_setting_or_variable(daemon_env, daemon_command,
                                                                 scripted, workspace, env,
                                                                 toml, ttl):
    scripted.add_scenario("o", {"repeat": True, "steps": [DONE]})
    config = workspace.parent / "config"
    (config / "heddle").mkdir(parents=True, exist_ok=True)
    (config / "heddle" / "settings.toml").write_text(toml)
    c = await lsp.start(dict(daemon_env, XDG_CONFIG_HOME=str(config), **env), daemon_command)
    try:
        sid = await new_session(c, workspace, "o")
        await c.call("turn/start", {"sessionId": sid, "prompt": "hi " * 600})
    finally:
        await lsp.stop(c)
    (request,) = scripted.requests_for("o")
    if ttl is None:
        assert "cache_control" not in json.dumps(request.body)
        assert isinstance(request.body["system"], str) and request.cache.breakpoints == ()
    else:
        assert {b.ttl for b in request.cache.breakpoints} == {"1h"}
        assert request.cache.creation_1h > 0 and request.cache.creation_5m == 0
