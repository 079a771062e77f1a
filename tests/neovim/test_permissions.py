"""Permission prompts in Neovim: asked through vim.ui.select, with the diff shown first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from heddle.scripted import ScriptedServer


def edit(old: str, new: str) -> dict[str, Any]:
    return {"type": "tool_use", "name": "Edit",
            "input": {"path": "app.py", "old_string": old, "new_string": new}}


def tool_result(request: Any) -> dict[str, Any]:
    [block] = [b for b in request.body["messages"][-1]["content"]
               if isinstance(b, dict) and b["type"] == "tool_result"]
    return block


def text_of(block: dict[str, Any]) -> str:
    content = block["content"]
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


def test_edits_are_allowed_or_rejected_through_the_picker(
        editor, scripted: ScriptedServer, workspace: Path) -> None:
    (workspace / "app.py").write_text("x = 1\n")
    scripted.add_scenario("edits", {"steps": [
        {"content": [{"type": "text", "text": "I will change x."}, edit("x = 1", "x = 2")]},
        {"content": [edit("x = 2", "x = 3")]},
        {"content": [{"type": "text", "text": "Finished."}]},
    ]})
    editor.setup(model="edits")
    # Allow the first edit; reject the second, with a message for the model.
    editor.answer(selects=["allowOnce", "reject"], inputs=["keep x at 2, it is a fixture"])

    editor.cmd("AgentRun bump x twice")
    status = editor.wait_idle()

    assert status["last"]["reason"] == "completed"
    assert (workspace / "app.py").read_text() == "x = 2\n"
    allowed, rejected = editor.harness("selects")
    assert allowed["kind"] == "heddle.permission"
    assert allowed["state"] == rejected["state"] == "waiting"
    assert allowed["prompt"] == "Heddle: Edit app.py"
    assert allowed["items"] == ["Allow once", "Always allow Edit(app.py)", "Reject",
                                "Review in the diff (hunk by hunk, or edit it)"]
    # When each picker opened, the transcript already showed the change in question.
    for asked, old, new in ((allowed, "x = 1", "x = 2"), (rejected, "x = 2", "x = 3")):
        lines = asked["transcript"]
        waiting = lines.index("- ? Edit app.py — waiting for permission")
        diff = lines[waiting + 1:lines.index("  ```", waiting + 1) + 1]
        assert diff[0] == "  ```diff"
        assert f"  -{old}" in diff and f"  +{new}" in diff
    assert editor.harness("inputs") == [{"prompt": "Tell Heddle why (optional): "}]

    lines = editor.transcript()
    done = [line for line in lines if line.startswith("- ")]
    assert done[0].startswith("- ✓ Edit app.py — ")
    assert done[1].startswith("- ⊘ Edit app.py — ")
    first = lines.index(done[0])
    assert lines[first + 1] == "  ```diff"
    assert "  +x = 2" in lines[first + 1:lines.index(done[1])]
    assert lines[-3:-1] == ["Finished.", ""]

    _, after_allow, after_reject = scripted.requests_for("edits")
    assert not tool_result(after_allow).get("is_error")
    assert tool_result(after_reject).get("is_error") is True
    assert "keep x at 2, it is a fixture" in text_of(tool_result(after_reject))


PLAN = "# Bump x\n\n1. Change x to 2 in app.py"
TURN = 90
"""Seconds a turn may take: a bound for a busy machine, far above the usual few."""


def present_plan() -> dict[str, Any]:
    return {"type": "tool_use", "name": "PresentPlan", "input": {"plan": PLAN}}


def test_a_plan_is_shown_in_a_float_and_approved_with_the_chosen_mode(
        editor, scripted: ScriptedServer, workspace: Path) -> None:
    (workspace / "app.py").write_text("x = 1\n")
    scripted.add_scenario("plan", {"steps": [
        {"content": [present_plan()]},
        {"content": [edit("x = 1", "x = 2")]},
        {"content": [{"type": "text", "text": "Finished."}]},
    ]})
    editor.setup(model="plan", permission_mode="plan")
    editor.answer(selects=[2])  # the second option: approve, and accept edits

    editor.cmd("AgentRun bump x")
    status = editor.wait_idle(TURN)

    assert status["last"]["reason"] == "completed"
    [asked] = editor.harness("selects")  # the edit after it ran without asking (acceptEdits)
    assert asked["kind"] == "heddle.plan" and asked["prompt"] == "Heddle: Plan: Bump x"
    assert asked["items"] == ["Approve, and ask before each edit", "Approve, and accept edits",
                              "Keep planning (with feedback)"]
    [float_] = asked["floats"]
    assert float_["title"] == " Heddle: the plan " and float_["filetype"] == "markdown"
    assert float_["lines"] == PLAN.split("\n")
    assert editor.harness("floats()") == []  # closed once answered
    assert (workspace / "app.py").read_text() == "x = 2\n"
    assert status["mode"] == "acceptEdits"
    lines = editor.transcript()
    assert "- ▶ plan approved: mode acceptEdits from now on" in lines
    [result] = [b for b in scripted.requests_for("plan")[1].body["messages"][-1]["content"]
                if b["type"] == "tool_result"]
    assert text_of(result).startswith("The user approved the plan.")


def test_a_plan_rejected_sends_the_feedback(editor, scripted: ScriptedServer,
                                            workspace: Path) -> None:
    scripted.add_scenario("replan", {"steps": [
        {"content": [present_plan()]},
        {"content": [{"type": "text", "text": "I will revise it."}]},
    ]})
    editor.setup(model="replan", permission_mode="plan")
    editor.answer(selects=["reject"], inputs=["keep x at 1"])

    editor.cmd("AgentRun bump x")
    status = editor.wait_idle(TURN)

    assert status["mode"] == "plan"
    assert editor.harness("inputs") == [{"prompt": "What should change in the plan? "}]
    result = tool_result(scripted.requests_for("replan")[1])
    assert result["is_error"] is True
    assert text_of(result).startswith("The user did not approve the plan and said: keep x at 1.")
