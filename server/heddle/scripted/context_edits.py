"""Context editing (beta `context-management-2025-06-27`): clearing old tool uses server-side.

A request's `context_management.edits` may hold `clear_tool_uses_20250919` edits. Each one,
when its trigger fires (the prompt has more than `trigger` input tokens, or more than `trigger`
tool uses; default 100,000 input tokens), clears the oldest tool uses except the last `keep`
(default 3) and those of `exclude_tools`: the tool_result's content becomes a placeholder, and
with `clear_tool_inputs` (true, or a list of tool names) the tool_use's input becomes {}. An
edit that would clear fewer than `clear_at_least` input tokens is not applied. The model (and
the cache) sees the edited prompt; the client keeps its full history. `clear_thinking_20251015`
is refused: the docs leave open which turns it counts. See docs/scripted-model.md.
"""

from __future__ import annotations

from typing import Any

from .prompt import build_prompt

__all__ = ["BETA", "PLACEHOLDER", "apply_edits", "check_context_management", "prepare"]

BETA = "context-management-2025-06-27"
# The docs say only "placeholder text"; this one is the scripted model's own.
PLACEHOLDER = "[tool result cleared by context management]"
CLEAR_TOOL_USES = "clear_tool_uses_20250919"
_EDIT_FIELDS = {"type", "trigger", "keep", "clear_at_least", "exclude_tools", "clear_tool_inputs"}


def _count(value: Any, where: str, kinds: tuple[str, ...]) -> str | None:
    if not isinstance(value, dict) or value.get("type") not in kinds:
        return f"{where}.type: Input should be {' or '.join(repr(k) for k in kinds)}"
    if not isinstance(value.get("value"), int) or isinstance(value["value"], bool) \
            or value["value"] < 0:
        return f"{where}.value: Input should be a non-negative integer"
    return None


def _names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def check_context_management(body: dict[str, Any], betas: frozenset[str]) -> str | None:
    """The 400 message for a context_management field the API would refuse, or None."""
    config = body.get("context_management")
    if config is None:
        return None
    if BETA not in betas:  # without the beta the field is unknown to the API
        return "context_management: Extra inputs are not permitted"
    if not isinstance(config, dict):
        return "context_management: Input should be a valid dictionary"
    edits = config.get("edits", [])
    if not isinstance(edits, list):
        return "context_management.edits: Input should be a valid list"
    for i, edit in enumerate(edits):
        where = f"context_management.edits.{i}"
        kind = edit.get("type") if isinstance(edit, dict) else None
        if kind == "clear_thinking_20251015":
            return f"{where}: clear_thinking_20251015 is not implemented by the scripted model"
        if kind != CLEAR_TOOL_USES:
            return (f"{where}: Input tag {kind!r} found using 'type' does not match any of the "
                    f"expected tags: '{CLEAR_TOOL_USES}', 'clear_thinking_20251015'")
        for key in edit:
            if key not in _EDIT_FIELDS:
                return f"{where}.{key}: Extra inputs are not permitted"
        error = None
        if "trigger" in edit:
            error = _count(edit["trigger"], f"{where}.trigger", ("input_tokens", "tool_uses"))
        if not error and "keep" in edit:
            error = _count(edit["keep"], f"{where}.keep", ("tool_uses",))
        if not error and edit.get("clear_at_least") is not None:
            error = _count(edit["clear_at_least"], f"{where}.clear_at_least", ("input_tokens",))
        if not error and edit.get("exclude_tools") is not None and not _names(edit["exclude_tools"]):
            error = f"{where}.exclude_tools: Input should be a valid list of strings"
        inputs = edit.get("clear_tool_inputs")
        if not error and inputs is not None and not isinstance(inputs, bool) and not _names(inputs):
            error = f"{where}.clear_tool_inputs: Input should be a boolean or a list of strings"
        if error:
            return error
    return None


def _tool_uses(messages: list[dict[str, Any]]) -> list[tuple[int, int, dict[str, Any]]]:
    """(message index, block index, tool_use block) in conversation order."""
    return [(n, m, block) for n, message in enumerate(messages) if message["role"] == "assistant"
            and isinstance(message["content"], list)
            for m, block in enumerate(message["content"]) if block.get("type") == "tool_use"]


def _clear(messages: list[dict[str, Any]], uses: list[tuple[int, int, dict[str, Any]]],
           inputs: Any) -> list[dict[str, Any]]:
    """A copy of the messages with these tool uses' results (and maybe inputs) cleared."""
    edited = [dict(m) for m in messages]
    for n, m, block in uses:
        if inputs is True or (isinstance(inputs, list) and block["name"] in inputs):
            content = edited[n]["content"] = list(edited[n]["content"])
            content[m] = {**content[m], "input": {}}
        reply = edited[n + 1]
        content = reply["content"] = list(reply["content"])
        for k, result in enumerate(content):
            if isinstance(result, dict) and result.get("type") == "tool_result" \
                    and result.get("tool_use_id") == block["id"]:
                content[k] = {**result, "content": PLACEHOLDER}
    return edited


def apply_edits(body: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The body the model sees after the request's edits, and the API's `applied_edits`."""
    applied: list[dict[str, Any]] = []
    for edit in (body.get("context_management") or {}).get("edits", []):
        messages = body["messages"]
        uses = _tool_uses(messages)
        before = build_prompt(body).tokens
        trigger = edit.get("trigger") or {"type": "input_tokens", "value": 100_000}
        measured = before if trigger["type"] == "input_tokens" else len(uses)
        if measured <= trigger["value"]:
            continue
        keep = (edit.get("keep") or {"value": 3})["value"]
        excluded = edit.get("exclude_tools") or []
        doomed = [u for u in uses[:max(len(uses) - keep, 0)] if u[2]["name"] not in excluded]
        if not doomed:
            continue
        edited = {**body, "messages": _clear(messages, doomed, edit.get("clear_tool_inputs"))}
        # A result shorter than the placeholder clears nothing: report 0, not a negative count.
        cleared = max(before - build_prompt(edited).tokens, 0)
        at_least = edit.get("clear_at_least")
        if at_least is not None and cleared < at_least["value"]:
            continue
        body = edited
        applied.append({"type": CLEAR_TOOL_USES, "cleared_tool_uses": len(doomed),
                        "cleared_input_tokens": cleared})
    return body, applied


def prepare(body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The body the model sees, and the answer's `context_management` (None without one)."""
    if "context_management" not in body:
        return body, None
    edited, applied = apply_edits(body)
    return edited, {"applied_edits": applied}
