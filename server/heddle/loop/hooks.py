"""Stop hooks as the loop sees them: a narrow seam, decided elsewhere."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class StopHookOutcome:
    blocking: list[str] = field(default_factory=list)
    """Messages that send the model back to work (appended to the conversation)."""
    prevent: str | None = None
    """Set when a hook ends the turn (terminal reason stop_hook_prevented)."""


class StopHooks(Protocol):
    async def __call__(self, payload: dict[str, Any]) -> StopHookOutcome: ...
