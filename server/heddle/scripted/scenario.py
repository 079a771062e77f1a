"""Scenario files for the scripted model: their types, parsing and loading.

A scenario is the list of responses one model name gives, in order. The JSON format is
documented in docs/scripted-model.md; the Structs below are its single definition, and
msgspec rejects unknown fields so a typo in a scenario file fails loudly at load time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from .models import DEFAULT_CACHE_MINIMUM, ApiModel, find_api_model

__all__ = [
    "BUNDLED_DIR",
    "Fault",
    "Match",
    "RedactedThinkingBlock",
    "Scenario",
    "ScenarioError",
    "Step",
    "TextBlock",
    "ThinkingBlock",
    "ToolUseBlock",
    "load_scenario",
    "parse_scenario",
]

BUNDLED_DIR = Path(__file__).parent / "scenarios"

# Error types of the Messages API, by HTTP status; other 4xx/5xx fall back below.
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}

STOP_REASONS = ("end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn", "refusal")


def error_type_for(status: int) -> str:
    return ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


class ScenarioError(ValueError):
    """A scenario that cannot be loaded: missing file, bad JSON, or a field that makes no sense."""


class _Spec(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    pass


class TextBlock(_Spec, tag="text", tag_field="type"):
    text: str


class ThinkingBlock(_Spec, tag="thinking", tag_field="type"):
    thinking: str
    signature: str = ""


class RedactedThinkingBlock(_Spec, tag="redacted_thinking", tag_field="type"):
    data: str


class ToolUseBlock(_Spec, tag="tool_use", tag_field="type"):
    name: str
    input: dict[str, Any] = {}
    # Omitted: the server generates `toolu_<n>`, unique per server.
    id: str | None = None


Block = TextBlock | ThinkingBlock | RedactedThinkingBlock | ToolUseBlock


class Fault(_Spec):
    """One way a response goes wrong. Exactly one of status/error_event/drop/stall/end_early
    is set."""

    status: int | None = None
    retry_after: float | None = None
    # Milliseconds; the `retry-after-ms` header the real API sends beside `retry-after`.
    retry_after_ms: float | None = None
    should_retry: bool | None = None
    prompt_too_long: bool = False
    message: str | None = None
    error_event: str | None = None
    drop: bool = False
    stall: float | None = None
    # The body ends properly, but early: what follows (message_stop at least) is never sent.
    end_early: bool = False
    # Mid-stream faults fire after this many SSE events (ping included) have been sent.
    after_events: int = 0
    # How many requests this step answers before the cursor moves on.
    times: int = 1

    def __post_init__(self) -> None:
        kinds = [self.status is not None, self.error_event is not None, self.drop,
                 self.stall is not None, self.end_early]
        if sum(kinds) != 1:
            raise ValueError("a fault needs exactly one of status, errorEvent, drop, stall, "
                             "endEarly")
        if self.status is not None and not 400 <= self.status <= 599:
            raise ValueError(f"fault status {self.status} is not an HTTP error status")
        if self.times < 1:
            raise ValueError("fault times must be at least 1")
        if self.after_events < 0:
            raise ValueError("fault afterEvents must not be negative")
        if self.stall is not None and self.stall < 0:
            raise ValueError("fault stall must not be negative")

    @property
    def is_status(self) -> bool:
        return self.status is not None


class Match(_Spec):
    last_user_contains: str


class Step(_Spec):
    content: tuple[Block, ...] = ()
    # Omitted: tool_use when the content has a tool_use block, else end_turn.
    stop_reason: str | None = None
    stop_sequence: str | None = None
    chunk: int = 16
    delay_ms: float = 0
    fault: Fault | None = None
    match: Match | None = None

    def __post_init__(self) -> None:
        if self.chunk < 1:
            raise ValueError("chunk must be at least 1")
        if self.delay_ms < 0:
            raise ValueError("delayMs must not be negative")
        if self.stop_reason is not None and self.stop_reason not in STOP_REASONS:
            raise ValueError(f"stopReason must be one of {', '.join(STOP_REASONS)}")

    @property
    def times(self) -> int:
        return self.fault.times if self.fault else 1

    def resolved_stop_reason(self) -> str:
        if self.stop_reason is not None:
            return self.stop_reason
        if any(isinstance(b, ToolUseBlock) for b in self.content):
            return "tool_use"
        return "end_turn"


class Scenario(_Spec):
    steps: tuple[Step, ...]
    # Omitted: the apiModel's context window (with its 1M beta), else 200000.
    context_window: int | None = None
    # True: after the last step the cursor goes back to the first (benchmarks).
    repeat: bool = False
    description: str = ""
    # The real model (id or alias) whose output limit and cache minimum this scenario imitates.
    # Omitted: no output limit, and the Sonnet cache minimum (1024 tokens).
    api_model: str | None = None

    def __post_init__(self) -> None:
        if self.context_window is not None and self.context_window < 1:
            raise ValueError("contextWindow must be at least 1")
        if self.repeat and not self.steps:
            raise ValueError("a repeating scenario needs at least one step")
        if self.api_model is not None:
            find_api_model(self.api_model)

    @property
    def model(self) -> ApiModel | None:
        return find_api_model(self.api_model) if self.api_model is not None else None

    def window(self, betas: frozenset[str]) -> int:
        """The context window a request with these beta headers gets."""
        if self.context_window is not None:
            return self.context_window
        model = self.model
        return model.window(betas) if model else 200_000

    @property
    def cache_minimum(self) -> int:
        model = self.model
        return model.cache_minimum if model else DEFAULT_CACHE_MINIMUM

    @property
    def cache_model(self) -> str:
        """Whose cache entries this scenario shares: the imitated model's id ("" if none)."""
        model = self.model
        return model.id if model else ""


def parse_scenario(data: Scenario | dict[str, Any] | bytes | str, *, source: str = "scenario",
                   ) -> Scenario:
    """Turn a dict or JSON text into a Scenario; ScenarioError says what and where."""
    if isinstance(data, Scenario):
        return data
    try:
        if isinstance(data, (bytes, str)):
            return msgspec.json.decode(data, type=Scenario)
        return msgspec.convert(data, Scenario)
    except msgspec.ValidationError as exc:
        raise ScenarioError(f"{source}: {exc}") from exc
    except msgspec.DecodeError as exc:
        raise ScenarioError(f"{source}: not valid JSON: {exc}") from exc


def load_scenario(path_or_name: str | Path) -> Scenario:
    """Load a scenario file, or a bundled scenario by name (a file stem in scenarios/)."""
    path = Path(path_or_name)
    if not path.is_file() and isinstance(path_or_name, str) and path.suffix == "" \
            and path.name == path_or_name:
        path = BUNDLED_DIR / f"{path_or_name}.json"
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise ScenarioError(f"cannot read scenario {path_or_name!s}: {exc.strerror}") from exc
    return parse_scenario(text, source=str(path))

