"""The repeat guard in Neovim: the notice in the transcript, the question in the picker (no
message asked for), and a stopped turn's last line."""

from __future__ import annotations

from pathlib import Path

from heddle.scripted import ScriptedServer

GREP = {"type": "tool_use", "name": "Grep", "input": {"pattern": "no_such_text_anywhere"}}
NOTICE = ("- ⟳ repeating itself: the agent made the same Grep call 4 times in a row with the "
          "same result")


def scenario(*after: dict) -> dict:
    return {"steps": [{"content": [GREP]}] * 4 + list(after)}


def test_the_user_lets_a_repeating_turn_go_on(editor, scripted: ScriptedServer,
                                              workspace: Path) -> None:
    scripted.add_scenario("loop-on", scenario({
        "match": {"lastUserContains": "let the turn go on"},
        "content": [{"type": "text", "text": "Trying another way."}]}))
    editor.setup(model="loop-on")
    editor.answer(selects=["allowOnce"])

    editor.cmd("AgentRun find it")
    status = editor.wait_idle(timeout=90)  # five model calls, a fresh daemon, a loaded machine

    assert status["last"]["reason"] == "completed"
    (asked,) = editor.harness("selects")
    assert asked["prompt"].startswith("Heddle: Heddle is repeating itself: the agent made")
    assert asked["items"] == ["Let it go on", "Stop the turn"]
    assert NOTICE in asked["transcript"]  # shown before the question
    # the refused call as it ended (the question does not take its line)
    assert asked["transcript"][-2].startswith(
        '- ⊘ Search "no_such_text_anywhere" in . — rejected: repeat guard: the agent made')
    assert editor.harness("inputs") == []  # no message is asked for
    assert "Trying another way." in "\n".join(editor.transcript())


def test_the_user_stops_a_repeating_turn(editor, scripted: ScriptedServer,
                                         workspace: Path) -> None:
    scripted.add_scenario("loop-stop", scenario())
    editor.setup(model="loop-stop")
    editor.answer(selects=["reject"])

    editor.cmd("AgentRun find it")
    status = editor.wait_idle(timeout=90)  # five model calls, a fresh daemon, a loaded machine

    assert status["last"]["reason"] == "loopDetected"
    assert editor.harness("inputs") == []
    lines = editor.transcript()
    assert NOTICE in lines
    assert any(line.startswith("_stopped: repeating itself: the agent made the same Grep call "
                               "4 times in a row with the same result; the turn was stopped")
               for line in lines), lines
