"""Request checks the real Messages API makes, with messages close to the API's own.

`check_request` returns the error message of the first problem found, or None. It is pure:
the server turns a message into a 400 `invalid_request_error` and consumes no step.
"""

from __future__ import annotations

from typing import Any

from .prompt import build_prompt, check_cache_control, estimate_tokens

__all__ = ["check_request", "estimate_input_tokens", "estimate_tokens", "last_user_text"]

_USER_BLOCKS = {"text", "image", "document", "tool_result", "search_result"}
_ASSISTANT_BLOCKS = {
    "text", "tool_use", "thinking", "redacted_thinking", "server_tool_use",
    "web_search_tool_result", "web_fetch_tool_result", "code_execution_tool_result",
}


def estimate_input_tokens(body: dict[str, Any]) -> int:
    """ceil(characters of the compact JSON of tools, system and messages / 4), absent counting
    0, without cache_control markers and the thinking of earlier turns (see prompt.py)."""
    return build_prompt(body).tokens


def last_user_text(messages: list[Any]) -> str:
    """Text of the last user message: text blocks and tool_result contents, concatenated."""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return _text_of(message.get("content"))
    return ""


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif block.get("type") == "tool_result":
            parts.append(_text_of(block.get("content")))
    return "".join(parts)


def check_request(body: Any, *, counting: bool = False) -> str | None:
    """Check a /v1/messages body; `counting` for /v1/messages/count_tokens (no max_tokens)."""
    if not isinstance(body, dict):
        return "body: Input should be a valid dictionary"
    for field in ("model", "messages") if counting else ("model", "max_tokens", "messages"):
        if field not in body:
            return f"{field}: Field required"
    return (_check_params(body) or _check_tools(body.get("tools"))
            or _check_messages(body["messages"]) or _check_thinking_first(body)
            or check_cache_control(body))


def _check_thinking_first(body: dict[str, Any]) -> str | None:
    """With thinking on, a tool loop in progress (the last message gives tool results) must
    hand back the thinking that came before its tool calls: the assistant message they answer
    starts with a thinking block."""
    thinking = body.get("thinking")
    if not (isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")):
        return None
    messages = body["messages"]
    last = messages[-1]
    if last["role"] != "user" or not isinstance(last["content"], list) or not any(
            b.get("type") == "tool_result" for b in last["content"]) or len(messages) < 2:
        return None
    n = len(messages) - 2
    blocks = messages[n]["content"]
    first = blocks[0].get("type") if isinstance(blocks, list) and blocks else "text"
    if first in ("thinking", "redacted_thinking"):
        return None
    return (f"messages.{n}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
            f"`{first}`. When `thinking` is enabled, a final `assistant` message must start "
            "with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` "
            "blocks). We recommend you include thinking blocks from previous turns. To avoid "
            "this requirement, disable `thinking`.")


def _check_params(body: dict[str, Any]) -> str | None:
    if not isinstance(body["model"], str) or not body["model"]:
        return "model: Input should be a valid string"
    max_tokens = body.get("max_tokens", 1_000_000)
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
        return "max_tokens: Input should be a valid integer"
    if max_tokens < 1:
        return "max_tokens: Input should be greater than or equal to 1"
    if "stream" in body and not isinstance(body["stream"], bool):
        return "stream: Input should be a valid boolean"
    system = body.get("system")
    if system is not None and not isinstance(system, (str, list)):
        return "system: Input should be a valid string or a list of text blocks"
    temperature = body.get("temperature")
    if temperature is not None and not (isinstance(temperature, (int, float))
                                        and 0 <= temperature <= 1):
        return "temperature: Input should be a number between 0 and 1"
    return _check_thinking(body, max_tokens) or _check_output_config(body.get("output_config"))


_THINKING_TYPES = ("adaptive", "disabled", "enabled")
EFFORTS = ("low", "medium", "high", "xhigh", "max")


def _check_thinking(body: dict[str, Any], max_tokens: int) -> str | None:
    """The `thinking` parameter's shape, and what it rules out: a `budget_tokens` of at least
    1024 below `max_tokens`; with thinking on, `temperature` 1, `top_p` ≥ 0.95, no `top_k`,
    and a `tool_choice` that does not force a tool."""
    thinking = body.get("thinking")
    if thinking is None:
        return None
    if not isinstance(thinking, dict) or thinking.get("type") not in _THINKING_TYPES:
        found = thinking.get("type") if isinstance(thinking, dict) else thinking
        return (f"thinking: Input tag '{found}' found using 'type' does not match any of the "
                "expected tags: 'adaptive', 'disabled', 'enabled'")
    kind = thinking["type"]
    allowed = {"type", "display"} | ({"budget_tokens"} if kind == "enabled" else set())
    for key in thinking:
        if key not in allowed:
            return f"thinking.{kind}.{key}: Extra inputs are not permitted"
    display = thinking.get("display")
    if display is not None and display not in ("summarized", "omitted"):
        return f"thinking.{kind}.display: Input should be 'summarized' or 'omitted'"
    if kind == "disabled":
        return None
    if kind == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget < 1024:
            return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
        if max_tokens <= budget:
            return "`max_tokens` must be greater than `thinking.budget_tokens`."
    temperature = body.get("temperature")
    if temperature is not None and temperature != 1:
        return ("`temperature` may only be set to 1 when thinking is enabled or in interleaved "
                "thinking mode.")
    if body.get("top_k") is not None:
        return "`top_k` is not supported when thinking is enabled."
    top_p = body.get("top_p")
    if top_p is not None and not (isinstance(top_p, (int, float)) and 0.95 <= top_p <= 1):
        return "`top_p` must be greater than or equal to 0.95 or unset when thinking is enabled."
    tool_choice = body.get("tool_choice")
    if isinstance(tool_choice, dict) and tool_choice.get("type") in ("any", "tool"):
        return "Thinking may not be enabled when tool_choice forces tool use."
    return None


def _check_output_config(config: Any) -> str | None:
    if config is None:
        return None
    if not isinstance(config, dict):
        return "output_config: Input should be a valid dictionary"
    effort = config.get("effort")
    if effort is not None and effort not in EFFORTS:
        return ("output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or "
                "'max'")
    return None


def _check_tools(tools: Any) -> str | None:
    if tools is None:
        return None
    if not isinstance(tools, list):
        return "tools: Input should be a valid list"
    names: set[str] = set()
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            return f"tools.{i}.name: Field required"
        if "type" not in tool or tool.get("type") == "custom":
            if not isinstance(tool.get("input_schema"), dict):
                return f"tools.{i}.custom.input_schema: Field required"
        if tool["name"] in names:
            return "tools: Tool names must be unique."
        names.add(tool["name"])
    return None


def _check_messages(messages: Any) -> str | None:
    if not isinstance(messages, list):
        return "messages: Input should be a valid list"
    if not messages:
        return "messages: at least one message is required"
    seen_tool_ids: set[str] = set()
    previous_tool_ids: list[str] = []
    previous_role = None
    for n, message in enumerate(messages):
        if not isinstance(message, dict):
            return f"messages.{n}: Input should be a valid dictionary"
        role = message.get("role")
        if role not in ("user", "assistant"):
            return f"messages.{n}.role: Input should be 'user' or 'assistant'"
        if n == 0 and role != "user":
            return 'messages: first message must use the "user" role'
        if role == previous_role:
            return (f'messages: roles must alternate between "user" and "assistant", '
                    f'but found multiple "{role}" roles in a row')
        content = message.get("content")
        is_final = n == len(messages) - 1
        error = _check_content(n, role, content, is_final)
        if error:
            return error
        blocks = content if isinstance(content, list) else []
        if role == "assistant":
            error = _check_assistant(n, blocks, seen_tool_ids)
            if error:
                return error
            previous_tool_ids = [b["id"] for b in blocks if b.get("type") == "tool_use"]
            if previous_tool_ids and is_final:
                return _missing_results(n, previous_tool_ids)
        else:
            error = _check_results(n, blocks, previous_tool_ids)
            if error:
                return error
            previous_tool_ids = []
        previous_role = role
    return None


def _check_content(n: int, role: str, content: Any, is_final: bool) -> str | None:
    empty_ok = role == "assistant" and is_final
    if isinstance(content, str):
        if not content and not empty_ok:
            return (f"messages.{n}: all messages must have non-empty content except for "
                    "the optional final assistant message")
        return None
    if not isinstance(content, list):
        return f"messages.{n}.content: Input should be a valid string or list"
    if not content and not empty_ok:
        return (f"messages.{n}: all messages must have non-empty content except for "
                "the optional final assistant message")
    allowed = _USER_BLOCKS if role == "user" else _ASSISTANT_BLOCKS
    for m, block in enumerate(content):
        where = f"messages.{n}.content.{m}"
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            return f"{where}: Input should be a valid dictionary with a `type`"
        kind = block["type"]
        if kind not in allowed:
            return (f"{where}.type: Input tag '{kind}' found using 'type' does not match any "
                    f"of the expected tags for a {role} message")
        if kind == "text" and (not isinstance(block.get("text"), str) or not block["text"]):
            return f"{where}.text: text content blocks must be non-empty"
        if kind == "tool_use" and not (isinstance(block.get("id"), str)
                                       and isinstance(block.get("name"), str)
                                       and isinstance(block.get("input"), dict)):
            return f"{where}: `tool_use` blocks need a string `id`, a `name` and an object `input`"
        if kind == "tool_result" and not isinstance(block.get("tool_use_id"), str):
            return f"{where}.tool_use_id: Field required"
        if kind == "thinking" and not isinstance(block.get("signature"), str):
            return f"{where}.thinking.signature: Field required"
    return None


def _check_assistant(n: int, blocks: list[dict[str, Any]], seen: set[str]) -> str | None:
    if blocks and blocks[-1].get("type") == "thinking":
        return (f"messages.{n}.content.{len(blocks) - 1}: "
                "The final block in an assistant message cannot be `thinking`.")
    for m, block in enumerate(blocks):
        if block.get("type") == "tool_use":
            if block["id"] in seen:
                return f"messages.{n}.content.{m}: `tool_use` ids must be unique"
            seen.add(block["id"])
    return None


def _missing_results(n: int, ids: list[str]) -> str:
    return (f"messages.{n}: `tool_use` ids were found without `tool_result` blocks immediately "
            f"after: {', '.join(ids)}. Each `tool_use` block must have a corresponding "
            "`tool_result` block in the next message.")


def _check_results(n: int, blocks: list[dict[str, Any]], expected: list[str]) -> str | None:
    answered: list[str] = []
    for m, block in enumerate(blocks):
        if block.get("type") != "tool_result":
            continue
        tool_use_id = block["tool_use_id"]
        if tool_use_id not in expected or tool_use_id in answered:
            return (f"messages.{n}.content.{m}: unexpected `tool_use_id` found in "
                    f"`tool_result` blocks: {tool_use_id}. Each `tool_result` block must have "
                    "a corresponding `tool_use` block in the previous message.")
        answered.append(tool_use_id)
    missing = [i for i in expected if i not in answered]
    return _missing_results(n - 1, missing) if missing else None
