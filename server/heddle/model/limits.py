"""The context window, the maximum output tokens and the thinking of each model family: the
one table the daemon uses, and how the settings override it.

A model id matches the longest family prefix in the table (`claude-opus-4-1-20250805` is
`claude-opus-4-1`; an unknown `claude-opus-4-9` falls back to `claude-opus-4`, whose limits
are the lowest of its family). An id that matches nothing gets `UNKNOWN`; a new or local
model is described in the settings (`[models."prefix"]`, see `heddle.settings`), and so is
a correction of the table.

Sources, read 2026-12-01:
- docs.claude.com/en/docs/about-claude/models/overview, as the scripted model's table records it
  (2025-11-08): Sonnet 4.5, Haiku 4.5, Sonnet 4, Sonnet 3.7 64K output; Opus 4.1 and Opus 4
  32K; Haiku 3.5 8,192; Haiku 3 4,096; all 200K context. The API's own error text ("max_tokens:
  64001 > 64000, which is the maximum allowed number of output tokens for ...") shows that K
  means 1000 for the 4.x models, while the Haiku 3.x limits are powers of two.
- platform.claude.com/docs/en/models/opus-4-5/overview: Opus 4.5, 200K context, 64K output.
- platform.claude.com/docs/en/models/opus-4-6/overview: Opus 4.6, 128K output (Opus 4.7, 4.8
  and Sonnet 4.6 the same: their pages on platform.claude.com/docs/en/models/).
- Reliable knowledge cutoffs (the date up to which a model's knowledge is broad and reliable,
  as the models overview's table gives it): Opus 4.6 May 2025, Sonnet 4.5 January 2025,
  Haiku 4.5 February 2025 (platform.claude.com/docs/en/about-claude/models/overview); Opus
  4.1, Opus 4 and Sonnet 4 January 2025, Sonnet 3.7 October 2024, Haiku 3.5 July 2024, Haiku 3
  August 2023 (the same table, earlier). A family not listed has no date recorded: the
  briefing then says the cutoff is not known rather than guess one.
Windows above 200K need a beta header Heddle does not send, so 200K is recorded for every
family: a window set too large makes the endpoint refuse the prompt, one too small only
compacts a little early.

Thinking, read 2026-12-02 (platform.claude.com/docs/en/build-with-claude/thinking-troubleshooting,
"Thinking support, defaults, and rejected configurations by model", and .../effort): Opus 4.7
and 4.8 take only adaptive thinking (`{"type": "enabled"}` is a 400); Opus 4.6 and Sonnet 4.6
take both (the budget form is deprecated there); Opus 4.5, Sonnet 4.5, Haiku 4.5 and the
earlier 4.x and 3.7 models take only a budget (`{"type": "adaptive"}` is a 400); the Haiku 3.x
models do not think. `output_config.effort` is taken by the 4.6 models (low, medium, high,
max) and Opus 4.7 and later (xhigh too); Opus 4.5 took it only under a beta header, which
Heddle does not send, so its effort is left to the model. Opus 4.7 and later send their
thinking empty (signed only) unless the request asks for `display: "summarized"`
(.../about-claude/models/whats-new-claude-4-7), which Heddle does, so that editors show it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from heddle.core.stream import ThinkingSupport
from heddle.settings import ModelLimitSettings


@dataclass(frozen=True)
class ModelLimits:
    context_window: int
    max_output: int
    """The highest `max_tokens` the endpoint accepts for this model."""
    thinking: ThinkingSupport | None = None
    """How it thinks; None: not known (a model the table does not know)."""


UNKNOWN = ModelLimits(200_000, 32_000)
"""A model the table does not know: the window every Claude model has, and an output limit
that is the lowest of the 4.x Claude models."""

_EFFORTS_4_6 = ("low", "medium", "high", "max")
_EFFORTS_4_7 = ("low", "medium", "high", "xhigh", "max")
ADAPTIVE_ONLY = ThinkingSupport(adaptive=True, efforts=_EFFORTS_4_7, hides_thinking=True)
BOTH = ThinkingSupport(adaptive=True, budget=True, efforts=_EFFORTS_4_6)
BUDGET_ONLY = ThinkingSupport(budget=True)
NO_THINKING = ThinkingSupport()

FAMILIES: dict[str, ModelLimits] = {
    "claude-opus-4-8": ModelLimits(200_000, 128_000, ADAPTIVE_ONLY),
    "claude-opus-4-7": ModelLimits(200_000, 128_000, ADAPTIVE_ONLY),
    "claude-opus-4-6": ModelLimits(200_000, 128_000, BOTH),
    "claude-opus-4-5": ModelLimits(200_000, 64_000, BUDGET_ONLY),
    "claude-opus-4-1": ModelLimits(200_000, 32_000, BUDGET_ONLY),
    "claude-opus-4": ModelLimits(200_000, 32_000, BUDGET_ONLY),
    "claude-sonnet-4-6": ModelLimits(200_000, 128_000, BOTH),
    "claude-sonnet-4-5": ModelLimits(200_000, 64_000, BUDGET_ONLY),
    "claude-sonnet-4": ModelLimits(200_000, 64_000, BUDGET_ONLY),
    "claude-haiku-4-5": ModelLimits(200_000, 64_000, BUDGET_ONLY),
    "claude-3-7-sonnet": ModelLimits(200_000, 64_000, BUDGET_ONLY),
    "claude-3-5-haiku": ModelLimits(200_000, 8_192, NO_THINKING),
    "claude-3-haiku": ModelLimits(200_000, 4_096, NO_THINKING),
}

THINKING_KINDS: dict[str, ThinkingSupport] = {
    "adaptive": ThinkingSupport(adaptive=True), "both": ThinkingSupport(adaptive=True, budget=True),
    "budget": BUDGET_ONLY, "none": NO_THINKING}
"""The settings' `[models."prefix"] thinking` values (the effort of such a model is left to it)."""


def _longest_prefix(model: str, prefixes) -> str | None:
    return max((p for p in prefixes if model.startswith(p)), key=len, default=None)


def model_limits(model: str, overrides: Mapping[str, ModelLimitSettings] | None = None
                 ) -> ModelLimits:
    """The limits of `model`: the table's, with what the settings set in their place (every
    entry whose key the id starts with, a longer key over a shorter one)."""
    family = _longest_prefix(model, FAMILIES)
    limits = FAMILIES[family] if family else UNKNOWN
    for key in sorted((k for k in overrides or {} if model.startswith(k)), key=len):
        given = overrides[key]
        limits = ModelLimits(given.context_window or limits.context_window,
                             given.max_output_tokens or limits.max_output,
                             THINKING_KINDS[given.thinking] if given.thinking
                             else limits.thinking)
    return limits


CUTOFFS: dict[str, str] = {
    "claude-opus-4-6": "May 2025",
    "claude-opus-4-1": "January 2025",
    "claude-opus-4-0": "January 2025",
    "claude-opus-4-2025": "January 2025",
    "claude-sonnet-4-5": "January 2025",
    "claude-sonnet-4-0": "January 2025",
    "claude-sonnet-4-2025": "January 2025",
    "claude-haiku-4-5": "February 2025",
    "claude-3-7-sonnet": "October 2024",
    "claude-3-5-haiku": "July 2024",
    "claude-3-haiku": "August 2023",
}
"""The reliable knowledge cutoff of each model family the sources above date (the briefing
tells the model). Opus 4 and Sonnet 4 are keyed as `-0` and with their dated ids' `-2025` so that a later
family of theirs (`claude-opus-4-7`) is not given their date."""


def knowledge_cutoff(model: str) -> str | None:
    """The reliable knowledge cutoff of `model` ("January 2025"); None: not recorded."""
    family = _longest_prefix(model, CUTOFFS)
    return CUTOFFS[family] if family else None
