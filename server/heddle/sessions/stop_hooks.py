"""Stop hooks from settings, as the loop's StopHooks seam.

Each `hooks.Stop` command gets `{"hook_event_name": "Stop", "session_id", "cwd",
"stop_hook_active", "last_assistant_message"}` on stdin when the model ends without asking for
tools. Exit 2 (stderr is the message) or `{"decision": "block", "reason": ...}` sends the model
back to work with that message; `{"continue": false, "stopReason": ...}` ends the turn
(`stopHookPrevented`). Anything else lets the turn complete.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from heddle.loop.hooks import StopHookOutcome
from heddle.permissions.hooks import HookRunner
from heddle.settings import HookCommand


@dataclass(frozen=True)
class CommandStopHooks:
    hooks: Sequence[HookCommand]
    runner: HookRunner

    async def __call__(self, payload: dict[str, Any]) -> StopHookOutcome:
        blocking: list[str] = []
        for hook in self.hooks:
            result = await self.runner.run(hook, {"hook_event_name": "Stop", **payload})
            if result is None:
                continue
            if result.exit_code == 2:
                blocking.append(result.stderr.strip() or f"the stop hook `{hook.command}` "
                                "objected")
                continue
            out = result.stdout_json or {}
            if out.get("continue") is False:
                return StopHookOutcome(prevent=str(out.get("stopReason") or
                                                   f"the stop hook `{hook.command}` ended the turn"))
            if out.get("decision") == "block":
                blocking.append(str(out.get("reason") or f"the stop hook `{hook.command}` "
                                    "objected"))
        return StopHookOutcome(blocking=blocking)
