"""`heddle ask` against a stream that breaks: the terminal cannot take printed text back, so
it says that the text above is discarded before the answer is written again."""

from __future__ import annotations

from e2e.test_cli import heddle


def test_ask_says_that_a_broken_off_answer_is_discarded(daemon_env, scripted, workspace):
    scripted.add_scenario("s", {"steps": [
        {"content": [{"type": "text", "text": "First draft of the answer."}], "chunk": 4,
         "fault": {"drop": True, "afterEvents": 5}},
        {"content": [{"type": "text", "text": "The whole answer."}]}]})
    result = heddle(["ask", "-w", str(workspace), "-m", "s", "hi"], daemon_env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    gone = next(i for i, line in enumerate(lines) if "↺ the answer above is discarded" in line)
    assert lines[0].startswith("First") and gone > 0
    assert "the model's response broke off" in lines[gone]
    assert any("retrying in" in line and "(attempt 2/5)" in line for line in lines[gone:])
    assert lines[-1] == "The whole answer."
