"""PresentPlan: in plan mode, show the user the plan and let them approve it; and the notes
that tell the model it is planning.

The permission policy turns every call into a prompt (`permission/request` with a plan
preview) in plan mode and refuses it in any other; the executor switches the session to the
mode the user picked when they approve. So `run` is reached only with an approved plan, and
says so to the model.

The notes go in a turn's user message, never in the system prompt, so the cached prefix is the
same whatever the mode: `plan_note` at every turn that runs in plan mode, `ended_note` at the
first turn after the user left plan mode without approving a plan.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

import msgspec

from heddle.core.events import PlanPreview
from heddle.core.tools import ToolContext, ToolOutput
from heddle.rules import PLAN_TOOL
from heddle.tools.base import ToolBase

_AFTER = {
    "default": "you may now edit files and run commands; each edit or command asks the user "
               "first unless a rule allows it",
    "acceptEdits": "you may now edit files (edits run without asking) and run commands (they "
                   "ask the user first unless a rule allows them)",
    "bypassPermissions": "you may now edit files and run commands without asking",
}


def plan_note() -> str:
    return (
        "[Plan mode] The user wants a plan before any change. You may read files, search, and "
        "run read-only shell commands (ls, cat, grep, rg, find, git log/status/diff/show, …); "
        "edits, writes and every other command are refused until the plan is approved. "
        f"Investigate what you need, then call the {PLAN_TOOL} tool with your plan in "
        "Markdown: the user reads it and approves it (planning then ends and you carry it out) "
        "or sends feedback for a better plan. If the user only asks a question, answer it "
        "without a plan.")


def ended_note(mode: str) -> str:
    return (f"[Plan mode ended] The user switched the session to mode {mode}: "
            f"{_AFTER.get(mode, 'the usual permissions apply')}. {PLAN_TOOL} is no longer "
            "needed.")


def rejected(message: str | None, reason: str | None = None) -> str:
    """The result of a plan the user did not approve (`reason`: nobody could answer)."""
    if reason and not message:
        return (f"The plan was not approved: {reason}. You are still in plan mode; tell the "
                "user your plan in your answer instead.")
    said = f" and said: {message}" if message else " without a comment"
    return (f"The user did not approve the plan{said}. You are still in plan mode: work the "
            f"feedback in (read more if you need to), then call {PLAN_TOOL} again with the "
            "revised plan, or ask the user if it is unclear what they want.")


class PresentPlanInput(msgspec.Struct, forbid_unknown_fields=True):
    plan: Annotated[str, msgspec.Meta(
        min_length=1, description="The plan in Markdown: what you found, the changes you will "
        "make file by file, and how you will check them")]


class PresentPlan(ToolBase):
    name: ClassVar[str] = PLAN_TOOL
    description: ClassVar[str] = (
        "Plan mode only: present your finished plan to the user for approval. The user reads "
        "the Markdown plan and either approves it — plan mode ends and you carry the plan out "
        "— or sends feedback, and you revise it and present it again. Call it once you have "
        "read enough to plan concretely, not to ask questions (ask those in your answer). "
        "Outside plan mode it is refused: just do the work.")
    input_type = PresentPlanInput
    concurrency_safe = False
    read_only = False  # it changes the mode; sub-agents (read-only tools only) never get it
    max_result_chars = 5_000

    def title(self, inp: PresentPlanInput, ctx: ToolContext) -> str:
        first = next((line.strip("# ").strip() for line in inp.plan.splitlines()
                      if line.strip("# ").strip()), "")
        return f"Plan: {first[:80]}" if first else "Plan"

    async def preview(self, inp: PresentPlanInput, ctx: ToolContext) -> PlanPreview:
        return PlanPreview(inp.plan)

    def rule_for(self, inp: PresentPlanInput, ctx: ToolContext) -> str:
        return ""

    async def run(self, inp: PresentPlanInput, ctx: ToolContext) -> ToolOutput:
        mode = ctx.permission_mode()
        if mode == "plan":  # not approved (a policy that let it run without asking)
            return ToolOutput("The plan was not approved: you are still in plan mode.",
                              "not approved", is_error=True)
        return ToolOutput(
            f"The user approved the plan. Plan mode has ended; the session is now in mode "
            f"{mode}: {_AFTER.get(mode, 'the usual permissions apply')}. Carry out the plan "
            "now, step by step.", f"approved: {mode}")
