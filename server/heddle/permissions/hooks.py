"""Hooks: commands from settings that see a tool call (or a stop) as JSON and may decide on it.

`run_hook` is the one way to run a hook command: `bash -c` in its own process group, the
payload as JSON on stdin, stdout and stderr collected (bounded) and passed on as they come (for
the editor to show live), the whole group killed when the timeout passes. `pre_tool_use` and `post_tool_use` interpret the results for tool calls:

- exit 2: deny (PreToolUse) or send stderr back to the model (PostToolUse);
- exit 0: stdout may be a JSON object: `{"decision": "allow" | "deny" | "ask",
  "reason": "...", "updatedInput": {...}}` before a tool, `{"decision": "block",
  "reason": "...", "additionalContext": "..."}` after it;
- any other exit, or a timeout: the hook failed; it is logged and has no say.
"""

from __future__ import annotations

import json
import logging
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal, Sequence

import anyio

from heddle.processes.environment import tool_env
from heddle.processes.groups import open_group, reap
from heddle.settings import HookCommand

log = logging.getLogger(__name__)

MAX_HOOK_OUTPUT = 1 << 20

OutputSink = Callable[[str, bytes], None]
"""Where a hook's output goes as it comes: `(stream, data)`, stream `stdout` or `stderr`."""
HookOutput = Callable[[str, bytes, str], None]
"""A session's sink for its hooks' output: `(stream, data, hook event name)`."""


@dataclass(frozen=True)
class HookResult:
    exit_code: int | None
    """The command's exit status; negative when a signal ended it; None if it never started."""
    stdout_json: dict[str, Any] | None
    """stdout parsed as a JSON object; None when it was empty or not an object."""
    stderr: str
    timed_out: bool
    stdout: str = ""


async def run_hook(command: str, payload: dict[str, Any], timeout: float, cwd: Path | str,
                   env: dict[str, str] | None, output: OutputSink | None = None) -> HookResult:
    data = json.dumps(payload).encode()
    try:
        process = await open_group(
            ["/bin/bash", "-c", command], cwd=str(cwd), env=env, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        return HookResult(None, None, f"cannot start the hook: {exc}", False)
    out, err = bytearray(), bytearray()

    async def feed() -> None:
        try:
            await process.stdin.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass  # the hook did not read its input
        finally:
            await process.stdin.aclose()

    async def drain(stream, buf: bytearray, name: str) -> None:
        async for chunk in stream:
            if len(buf) < MAX_HOOK_OUTPUT:
                buf += chunk[:MAX_HOOK_OUTPUT - len(buf)]
            if output is not None:
                output(name, chunk)

    try:
        with anyio.move_on_after(timeout) as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(feed)
                tg.start_soon(drain, process.stdout, out, "stdout")
                tg.start_soon(drain, process.stderr, err, "stderr")
            await process.wait()
    finally:
        await reap(process)
    stdout = out.decode(errors="replace")
    return HookResult(process.returncode, _json_object(stdout), err.decode(errors="replace"),
                      scope.cancelled_caught, stdout)


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


@dataclass(frozen=True)
class HookRunner:
    """What every hook of one session runs with."""

    session_id: str
    cwd: Path
    env: dict[str, str] | None
    output: HookOutput | None = None
    """Where the hooks' output goes as it comes (the editor); None: nowhere."""

    async def run(self, hook: HookCommand, payload: dict[str, Any]) -> HookResult | None:
        """The result, or None (logged) when the hook failed or timed out."""
        env = dict(self.env or tool_env(), HEDDLE_PROJECT_DIR=str(self.cwd))
        event = payload["hook_event_name"]
        sink = None if self.output is None else (
            lambda stream, data: self.output(stream, data, event))
        result = await run_hook(hook.command, {"session_id": self.session_id,
                                               "cwd": str(self.cwd), **payload},
                                hook.timeout, self.cwd, env, sink)
        name = f"{payload['hook_event_name']} hook `{hook.command}`"
        if result.timed_out:
            log.warning("%s timed out after %g s; ignoring it", name, hook.timeout)
            return None
        if result.exit_code not in (0, 2):
            log.warning("%s failed (exit %s): %s; ignoring it", name, result.exit_code,
                        result.stderr.strip()[:500])
            return None
        return result


Verdict = Literal["allow", "deny", "ask"]
_ALIASES = {"approve": "allow", "block": "deny"}


@dataclass(frozen=True)
class PreToolVerdict:
    decision: Verdict | None = None
    """None: no hook had an opinion."""
    reason: str | None = None
    updated_input: dict[str, Any] | None = None
    """The input a hook replaced the call's input with; None: unchanged."""
    stop: str | None = None
    """A hook answered `{"continue": false}`: the call does not run and the turn ends after
    this batch of tools (reason `hookStopped`), with this `stopReason`."""


async def pre_tool_use(hooks: Sequence[HookCommand], runner: HookRunner, tool_name: str,
                       tool_input: dict[str, Any], mode: str) -> PreToolVerdict:
    """Run the matching hooks in order. Deny wins at once; ask beats allow; each hook sees the
    input as the previous one left it."""
    decision: Verdict | None = None
    reason: str | None = None
    updated: dict[str, Any] | None = None
    for hook in hooks:
        if not hook.matches(tool_name):
            continue
        result = await runner.run(hook, {
            "hook_event_name": "PreToolUse", "permission_mode": mode, "tool_name": tool_name,
            "tool_input": updated if updated is not None else tool_input})
        if result is None:
            continue
        if result.exit_code == 2:
            return PreToolVerdict("deny", result.stderr.strip() or "a PreToolUse hook refused it",
                                  updated)
        out = result.stdout_json or {}
        if out.get("continue") is False:
            why = str(out.get("stopReason") or f"the PreToolUse hook `{hook.command}` stopped the turn")
            return PreToolVerdict("deny", why, updated, stop=why)
        if isinstance(out.get("updatedInput"), dict):
            updated = out["updatedInput"]
        said = _ALIASES.get(out.get("decision"), out.get("decision"))
        if said == "deny":
            return PreToolVerdict("deny", out.get("reason") or "a PreToolUse hook refused it",
                                  updated)
        if said in ("allow", "ask") and decision != "ask":
            decision, reason = said, out.get("reason")
        elif said is not None and said not in ("allow", "ask"):
            log.warning("PreToolUse hook `%s` answered an unknown decision %r; ignoring it",
                        hook.command, said)
    return PreToolVerdict(decision, reason, updated)


@dataclass(frozen=True)
class PostToolFeedback:
    text: str
    """What the hooks said, appended to the tool result the model reads."""
    block: bool
    """A hook objected: the result is marked as an error."""
    stop: str | None = None
    """A hook answered `{"continue": false}`: the turn ends after this batch of tools."""


async def post_tool_use(hooks: Sequence[HookCommand], runner: HookRunner, tool_name: str,
                        tool_input: dict[str, Any], content: str, is_error: bool
                        ) -> PostToolFeedback | None:
    notes: list[str] = []
    block = False
    stop: str | None = None
    for hook in hooks:
        if not hook.matches(tool_name):
            continue
        result = await runner.run(hook, {
            "hook_event_name": "PostToolUse", "tool_name": tool_name, "tool_input": tool_input,
            "tool_response": {"content": content, "is_error": is_error}})
        if result is None:
            continue
        if result.exit_code == 2:
            block = True
            notes.append(result.stderr.strip() or "a PostToolUse hook objected")
            continue
        out = result.stdout_json or {}
        if out.get("continue") is False:
            stop = str(out.get("stopReason") or f"the PostToolUse hook `{hook.command}` stopped the turn")
            notes.append(stop)
        if out.get("decision") == "block":
            block = True
            notes.append(str(out.get("reason") or "a PostToolUse hook objected"))
        if out.get("additionalContext"):
            notes.append(str(out["additionalContext"]))
    if not notes:
        return None
    return PostToolFeedback("\n".join(notes), block, stop)
