"""Permission prompts as ACP `session/request_permission`, answers onto Heddle's rules.

| ACP option      | Heddle                                                          |
|-----------------|-----------------------------------------------------------------|
| `allow_once`    | `allowOnce`                                                     |
| `allow_always`  | `allowAlways` with the call's rule (kept for the session)       |
| `reject_once`   | `reject`                                                        |
| `reject_always` | `reject`, and the call's rule added as a session `deny` rule    |
| `cancelled`     | `reject` (the client cancelled the prompt turn)                 |

A plan (PresentPlan in plan mode) is asked with its own options: `approve_default` and
`approve_accept_edits` (kind `allow_once`: approve, and go on in that mode) and
`keep_planning` (`reject_once`); the plan is the tool call's content, in Markdown.
The repeat guard's question (a prompt with `loop`) offers `allow_once` (let the turn go on)
and `reject_once` (stop it), about the refused call, whose status it leaves alone.

No answer within the timeout, an error answer or an unknown option is a rejection that says
why, as on the LSP door.
"""

from __future__ import annotations

import logging
from typing import Any, Awaitable, Callable

import anyio
from acp.schema import AllowedOutcome, RequestPermissionResponse
from pydantic import ValidationError

from heddle.core.events import CommandPreview, DiffPreview, PlanPreview
from heddle.permissions.policy import PermissionAnswer, PermissionPrompt, Rule, RuleError
from heddle.sessions.session import Session
from heddle.shown import one_line
from heddle.acp.updates import Translator, kind_of

log = logging.getLogger(__name__)

Request = Callable[[str, dict[str, Any]], Awaitable[Any]]


PLAN_OPTIONS = [
    {"optionId": "approve_default", "name": "Approve, and ask before each edit",
     "kind": "allow_once"},
    {"optionId": "approve_accept_edits", "name": "Approve, and accept edits",
     "kind": "allow_once"},
    {"optionId": "keep_planning", "name": "Keep planning", "kind": "reject_once"},
]
PLAN_MODES = {"approve_default": "default", "approve_accept_edits": "acceptEdits"}


def options(prompt: PermissionPrompt) -> list[dict[str, str]]:
    if isinstance(prompt.preview, PlanPreview):
        return PLAN_OPTIONS
    if prompt.loop:
        return [{"optionId": "allow_once", "name": "Let it go on", "kind": "allow_once"},
                {"optionId": "reject_once", "name": "Stop the turn", "kind": "reject_once"}]
    rule = one_line(prompt.rule or "")  # (an exact command line may hold a newline, a U+202E)
    always = [{"optionId": "allow_always", "name": f"Always allow {rule}",
               "kind": "allow_always"},
              {"optionId": "reject_always", "name": f"Always reject {rule}",
               "kind": "reject_always"}] if prompt.rule else []
    return [{"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
            *always[:1],
            {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
            *always[1:]]


def tool_call(prompt: PermissionPrompt, translator: Translator) -> dict[str, Any]:
    """The call the client is asked about, with the whole proposed file for an edit. For the
    repeat guard's question, the refused call has ended already: only its title changes."""
    if prompt.loop:
        return {"toolCallId": prompt.tool_call_id, "title": prompt.title,
                "_meta": {"heddle": {"loop": True}}}
    call: dict[str, Any] = {"toolCallId": prompt.tool_call_id, "title": prompt.title,
                            "kind": kind_of(prompt.tool), "status": "pending",
                            "rawInput": prompt.input}
    p = prompt.preview
    if isinstance(p, DiffPreview):
        path = translator.path(p.path) or p.path
        call["locations"] = [{"path": path}]
        call["content"] = ([{"type": "diff", "path": path, "oldText": p.before or None,
                             "newText": p.after}] if p.after is not None else
                           [{"type": "content", "content": {
                               "type": "text", "text": f"```diff\n{p.diff}\n```"}}])
        if call["content"][0].get("oldText") is None:
            call["content"][0].pop("oldText", None)
    elif isinstance(p, PlanPreview):
        call["content"] = [{"type": "content", "content": {"type": "text", "text": p.plan}}]
    elif isinstance(p, CommandPreview):
        call["content"] = [{"type": "content", "content": {
            "type": "text", "text": f"```\n{p.command}\n```\nin {p.cwd}"}}]
    return call


def asker(session: Session, request: Request, translator: Translator, timeout: float):
    async def ask(prompt: PermissionPrompt) -> PermissionAnswer:
        params = {"sessionId": session.id, "toolCall": tool_call(prompt, translator),
                  "options": options(prompt)}
        try:
            with anyio.fail_after(timeout):
                raw = await request("session/request_permission", params)
        except TimeoutError:
            return PermissionAnswer("reject", reason=f"no answer within {timeout:g} s")
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:
            return PermissionAnswer("reject", reason=f"the client answered with an error: {exc}")
        try:
            outcome = RequestPermissionResponse.model_validate(raw).outcome
        except ValidationError as exc:
            return PermissionAnswer("reject", reason=f"the client's answer was invalid: {exc}")
        if not isinstance(outcome, AllowedOutcome):
            return PermissionAnswer("reject", reason="the client cancelled the request")
        chosen = outcome.option_id
        if isinstance(prompt.preview, PlanPreview):
            return plan_answer(chosen)
        if chosen == "allow_once":
            return PermissionAnswer("allowOnce")
        if chosen == "allow_always" and prompt.rule:
            return PermissionAnswer("allowAlways", rule=prompt.rule)
        if chosen == "reject_once":
            return PermissionAnswer("reject")
        if chosen == "reject_always" and prompt.rule:
            try:
                session.policy.add(Rule("deny", prompt.rule, "session"))
            except RuleError as exc:
                log.warning("could not keep the deny rule %r: %s", prompt.rule, exc)
            return PermissionAnswer("reject", message=f"The user always rejects {prompt.rule} "
                                    "in this session.")
        return PermissionAnswer("reject", reason=f"the client chose an option that was not "
                                f"offered: {chosen!r}")
    return ask


def plan_answer(chosen: str) -> PermissionAnswer:
    if chosen in PLAN_MODES:
        return PermissionAnswer("allowOnce", mode=PLAN_MODES[chosen])  # type: ignore[arg-type]
    if chosen == "keep_planning":
        return PermissionAnswer("reject")
    return PermissionAnswer("reject", reason=f"the client chose an option that was not "
                            f"offered: {chosen!r}")
