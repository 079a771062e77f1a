"""A scenario's `apiModel`: the real model's output limit and context window."""

from __future__ import annotations

import anthropic
import pytest

from heddle.scripted import ScenarioError, ScriptedServer, parse_scenario

from .conftest import text_step, user


def _scenario(model: str | None = None) -> dict:
    return {"repeat": True, "steps": [text_step("ok")], **({"apiModel": model} if model else {})}


async def _create(client: anthropic.AsyncAnthropic, **kwargs):
    # An explicit timeout: the SDK refuses large non-streamed max_tokens without one.
    return await client.messages.create(timeout=30, **kwargs)


# The docs' "Max output" (models overview, 2025-11-08), written out here, not read from the table.
@pytest.mark.parametrize(("model", "full_id", "limit"), [
    ("claude-opus-4-1", "claude-opus-4-1-20250805", 32_000),
    ("claude-sonnet-4-5", "claude-sonnet-4-5-20250929", 64_000),
    ("claude-haiku-4-5-20251001", "claude-haiku-4-5-20251001", 64_000),
    ("claude-3-5-haiku-latest", "claude-3-5-haiku-20241022", 8192),
])
async def test_max_tokens_above_the_models_limit_is_refused(server: ScriptedServer, client,
                                                            model, full_id, limit):
    server.add_scenario("s", _scenario(model))
    ok = await _create(client, model="s", max_tokens=limit, messages=user("hi"))
    assert ok.content[0].text == "ok"
    with pytest.raises(anthropic.BadRequestError) as caught:
        await _create(client, model="s", max_tokens=limit + 1, messages=user("hi"))
    assert caught.value.body["error"] == {
        "type": "invalid_request_error",
        "message": f"max_tokens: {limit + 1} > {limit}, which is the maximum allowed number of "
                   f"output tokens for {full_id}"}
    assert server.cursor("s") == 0 and server.requests[-1].step_index is None


async def test_without_api_model_there_is_no_output_limit(server: ScriptedServer, client):
    server.add_scenario("s", _scenario())
    reply = await _create(client, model="s", max_tokens=1_000_000, messages=user("hi"))
    assert reply.stop_reason == "end_turn"


async def test_the_128k_output_beta_raises_sonnet_3_7s_limit(server: ScriptedServer, client):
    server.add_scenario("s", _scenario("claude-3-7-sonnet-20250219"))
    with pytest.raises(anthropic.BadRequestError):
        await _create(client, model="s", max_tokens=64_001, messages=user("hi"))
    beta = {"anthropic-beta": "output-128k-2025-02-19"}
    await _create(client, model="s", max_tokens=128_000, messages=user("hi"),
                                 extra_headers=beta)
    with pytest.raises(anthropic.BadRequestError) as caught:
        await _create(client, model="s", max_tokens=128_001, messages=user("hi"),
                                     extra_headers=beta)
    assert "128001 > 128000" in caught.value.body["error"]["message"]


async def test_the_context_window_comes_from_the_model(server: ScriptedServer, client):
    server.add_scenario("s", _scenario("claude-sonnet-4-5"))
    server.add_scenario("small", {**_scenario("claude-sonnet-4-5"), "contextWindow": 100})
    big = user("x" * 800_100)  # just over 200,000 tokens
    with pytest.raises(anthropic.BadRequestError) as caught:
        await _create(client, model="s", max_tokens=10, messages=big)
    assert caught.value.body["error"]["message"].endswith("tokens > 200000 maximum")
    await _create(client, model="s", max_tokens=10, messages=big,
                                 extra_headers={"anthropic-beta": "context-1m-2025-08-07"})
    with pytest.raises(anthropic.BadRequestError) as caught:  # contextWindow overrides it
        await _create(client, model="small", max_tokens=10, messages=user("y" * 500))
    assert caught.value.body["error"]["message"].endswith("tokens > 100 maximum")


def test_an_unknown_api_model_fails_when_the_scenario_loads():
    with pytest.raises(ScenarioError, match="apiModel 'claude-opus-9' is not a known model"):
        parse_scenario(_scenario("claude-opus-9"))


# The docs' thinking table (thinking-troubleshooting, read 2026-12-02), written out here.
@pytest.mark.parametrize(("model", "params", "message"), [
    ("claude-opus-4-7", {"thinking": {"type": "enabled", "budget_tokens": 1024}},
     '"thinking.type.enabled" is not supported for this model. Use "thinking.type.adaptive" '
     "instead."),
    ("claude-sonnet-4-5", {"thinking": {"type": "adaptive"}},
     '"thinking.type.adaptive" is not supported for this model. Use "thinking.type.enabled" '
     "instead."),
    ("claude-3-5-haiku-latest", {"thinking": {"type": "enabled", "budget_tokens": 1024}},
     "claude-3-5-haiku-20241022 does not support thinking."),
    ("claude-sonnet-4-5", {"output_config": {"effort": "low"}},
     "output_config.effort: effort is not supported for claude-sonnet-4-5-20250929."),
    ("claude-opus-4-6", {"output_config": {"effort": "xhigh"}},
     "output_config.effort: 'xhigh' is not supported for claude-opus-4-6; it takes low, "
     "medium, high, max."),
])
async def test_thinking_or_effort_the_model_does_not_take_is_refused(
        server: ScriptedServer, client, model, params, message):
    server.add_scenario("s", _scenario(model))
    with pytest.raises(anthropic.BadRequestError) as caught:
        await _create(client, model="s", max_tokens=2000, messages=user("hi"), **params)
    assert caught.value.api_message == message
    assert server.cursor("s") == 0 and server.requests[-1].step_index is None


@pytest.mark.parametrize(("model", "params"), [
    ("claude-opus-4-7", {"thinking": {"type": "adaptive"}, "output_config": {"effort": "xhigh"}}),
    ("claude-opus-4-6", {"thinking": {"type": "enabled", "budget_tokens": 1024}}),
    ("claude-opus-4-6", {"thinking": {"type": "adaptive"}, "output_config": {"effort": "max"}}),
    ("claude-sonnet-4-5", {"thinking": {"type": "enabled", "budget_tokens": 1024}}),
    ("claude-3-haiku-20240307", {"thinking": {"type": "disabled"}}),
])
async def test_thinking_the_model_takes_is_answered(server: ScriptedServer, client, model,
                                                    params):
    server.add_scenario("s", _scenario(model))
    reply = await _create(client, model="s", max_tokens=2000, messages=user("hi"), **params)
    assert reply.content[0].text == "ok"


async def test_opus_4_7_sends_its_thinking_only_when_asked_for_it_summarised(
        server: ScriptedServer, client):
    server.add_scenario("s", {"apiModel": "claude-opus-4-7", "repeat": True, "steps": [
        {"content": [{"type": "thinking", "thinking": "Hmm.", "signature": "sig"},
                     {"type": "text", "text": "ok"}]}]})
    hidden = await _create(client, model="s", max_tokens=2000, messages=user("hi"),
                           thinking={"type": "adaptive"})
    shown = await _create(client, model="s", max_tokens=2000, messages=user("hi"),
                          thinking={"type": "adaptive", "display": "summarized"})
    assert (hidden.content[0].thinking, hidden.content[0].signature) == ("", "sig")
    assert shown.content[0].thinking == "Hmm."
