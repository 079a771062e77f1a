"""The real Claude models a scenario can imitate: context window, output limit, cache minimum,
and the thinking and effort they take.

A scenario names one with `apiModel` (an id or an alias). The numbers come from Anthropic's
docs as published on 2025-11-08 (docs.claude.com/en/docs/about-claude/models/overview for the
context windows and "Max output", .../build-with-claude/prompt-caching for the minimum cacheable
prompt length); docs/scripted-model.md lists them with their sources. The docs write output
limits as "64K"; the API's own error ("max_tokens: 128001 > 64000, which is the maximum allowed
number of output tokens for claude-opus-4-5-20251101") shows K means 1000 for the 4.x models,
while the Haiku 3.x limits are the powers of two 8192 and 4096.

The thinking column, and the later models, as the docs were read on 2026-12-02:
platform.claude.com/docs/en/build-with-claude/thinking-troubleshooting ("Thinking support,
defaults, and rejected configurations by model": `adaptive` only, `enabled` only, both, none;
the error of the wrong one "starts with \"thinking.type.enabled\" is not supported"),
.../build-with-claude/effort (the levels: low, medium, high and max from the 4.6 models, xhigh
from Opus 4.7), .../models/<model>/overview (output limits) and the prompt caching page
(minimums: 4096 for Opus 4.5 and 4.6, 2048 for Opus 4.7); .../whats-new-claude-4-7 (its
thinking is omitted, sent empty, unless `display: "summarized"` asks for it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["API_MODELS", "DEFAULT_CACHE_MINIMUM", "ApiModel", "find_api_model"]

# Without `apiModel` a scenario caches like Claude Sonnet: prompts under 1024 tokens are not cached.
DEFAULT_CACHE_MINIMUM = 1024

LONG_CONTEXT_BETA = "context-1m-2025-08-07"
LONG_OUTPUT_BETA = "output-128k-2025-02-19"


@dataclass(frozen=True)
class ApiModel:
    id: str
    aliases: tuple[str, ...]
    context_window: int
    max_output: int
    cache_minimum: int
    # The beta header that raises the context window to 1M tokens, where the model has one.
    long_context: bool = False
    # The beta header output-128k-2025-02-19 raises the output limit to 128000 (Sonnet 3.7).
    long_output: bool = False
    # The forms of `thinking` it takes: "enabled" (a budget), "adaptive", "both" or "none".
    thinking: str = "enabled"
    # The `output_config.effort` levels it takes; empty: the parameter is refused.
    efforts: tuple[str, ...] = ()
    # Its thinking is sent empty (signed only) unless the request asks for
    # `thinking.display: "summarized"` (Opus 4.7: "omitted" by default).
    omits_thinking: bool = False

    def window(self, betas: frozenset[str]) -> int:
        return 1_000_000 if self.long_context and LONG_CONTEXT_BETA in betas else self.context_window

    def output_limit(self, betas: frozenset[str]) -> int:
        return 128_000 if self.long_output and LONG_OUTPUT_BETA in betas else self.max_output

    def output_error(self, max_tokens: int, betas: frozenset[str]) -> str | None:
        """The API's 400 message when `max_tokens` is above this model's limit, else None."""
        limit = self.output_limit(betas)
        if max_tokens <= limit:
            return None
        return (f"max_tokens: {max_tokens} > {limit}, which is the maximum allowed number of "
                f"output tokens for {self.id}")

    def thinking_error(self, body: dict[str, Any]) -> str | None:
        """The API's 400 message when the request's thinking or effort is one this model does
        not take, else None (the shape was checked before: `validate.check_request`)."""
        kind = (body.get("thinking") or {}).get("type")
        if kind in ("enabled", "adaptive"):
            if self.thinking == "none":
                return f"{self.id} does not support thinking."
            if self.thinking not in (kind, "both"):
                other = "adaptive" if kind == "enabled" else "enabled"
                return (f'"thinking.type.{kind}" is not supported for this model. Use '
                        f'"thinking.type.{other}" instead.')
        effort = (body.get("output_config") or {}).get("effort")
        if effort is not None and effort not in self.efforts:
            if not self.efforts:
                return f"output_config.effort: effort is not supported for {self.id}."
            return (f"output_config.effort: {effort!r} is not supported for {self.id}; it "
                    f"takes {', '.join(self.efforts)}.")
        return None


_EFFORTS_4_6 = ("low", "medium", "high", "max")
_EFFORTS_4_7 = ("low", "medium", "high", "xhigh", "max")

API_MODELS: tuple[ApiModel, ...] = (
    ApiModel("claude-opus-4-7", (), 200_000, 128_000, 2048, long_context=True,
             thinking="adaptive", efforts=_EFFORTS_4_7, omits_thinking=True),
    ApiModel("claude-opus-4-6", (), 200_000, 128_000, 4096, long_context=True,
             thinking="both", efforts=_EFFORTS_4_6),
    ApiModel("claude-opus-4-5-20251101", ("claude-opus-4-5",), 200_000, 64_000, 4096),
    ApiModel("claude-sonnet-4-5-20250929", ("claude-sonnet-4-5",), 200_000, 64_000, 1024,
             long_context=True),
    ApiModel("claude-haiku-4-5-20251001", ("claude-haiku-4-5",), 200_000, 64_000, 4096),
    ApiModel("claude-opus-4-1-20250805", ("claude-opus-4-1",), 200_000, 32_000, 1024),
    ApiModel("claude-sonnet-4-20250514", ("claude-sonnet-4-0",), 200_000, 64_000, 1024,
             long_context=True),
    ApiModel("claude-opus-4-20250514", ("claude-opus-4-0",), 200_000, 32_000, 1024),
    ApiModel("claude-3-7-sonnet-20250219", ("claude-3-7-sonnet-latest",), 200_000, 64_000, 1024,
             long_output=True),
    ApiModel("claude-3-5-haiku-20241022", ("claude-3-5-haiku-latest",), 200_000, 8192, 2048,
             thinking="none"),
    ApiModel("claude-3-haiku-20240307", (), 200_000, 4096, 2048, thinking="none"),
)

_BY_NAME = {name: m for m in API_MODELS for name in (m.id, *m.aliases)}


def find_api_model(name: str) -> ApiModel:
    """The model with this id or alias; ValueError names the known ones."""
    try:
        return _BY_NAME[name]
    except KeyError:
        known = ", ".join(sorted(_BY_NAME))
        raise ValueError(f"apiModel {name!r} is not a known model (known: {known})") from None
