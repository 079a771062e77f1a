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
