"""`heddle ask` on a real terminal, asked about an edit of several hunks: hunk by hunk, as
`git add -p` asks (y / n with an optional message / a: this and the rest / d: none of the
rest)."""

from __future__ import annotations

import time

from e2e.test_cli import Terminal
from e2e.test_editor_edits import THREE, multi_edit
from e2e.test_permissions import DONE, last_results

QUESTION = b"[d] none of this or the rest > "


def run_ask(daemon_env, scripted, workspace, model: str, typed: list[bytes]) -> Terminal:
    """`heddle ask` of a MultiEdit of three hunks in values.py; `typed`: one line per question."""
    (workspace / "values.py").write_text(THREE)
    scripted.add_scenario(model, {"steps": [{"content": [multi_edit()]}, DONE]})
    term = Terminal(["ask", "-w", str(workspace), "-m", model, "go"], daemon_env)
    try:
        for n, line in enumerate(typed, 1):  # each line once its question is on the screen
            deadline = time.monotonic() + 30
            while term.seen.count(QUESTION) + term.seen.count(b"(optional) > ") < n:
                assert time.monotonic() < deadline and term._read(deadline), term.text()
            term.type(line)
        assert term.wait() == 0, term.text()
    finally:
        term.close()
    return term


def test_ask_accepts_and_rejects_hunk_by_hunk(daemon_env, scripted, workspace):
    term = run_ask(daemon_env, scripted, workspace, "hunks",
                   [b"y\n", b"n\n", b"keep the old name\n", b"y\n"])
    text = term.text()
    assert "? Allow Edit values.py (3 changes), hunk by hunk (3 hunks)" in text
    assert "hunk 1 of 3" in text and "hunk 3 of 3" in text
    assert "@@ -12,7 +12,7 @@" in text  # each hunk is shown before its question
    assert text.index("+renamed = 15") < text.index("hunk 3 of 3")
    assert (workspace / "values.py").read_text() == THREE.replace(
        "v2 = 2", "v2 = 'two'").replace("v28 = 28", "v28 = 'twenty-eight'")
    (result,) = last_results(scripted, "hunks")
    assert 'Rejected: hunk 2 of 3 (lines 12-18), the user said: "keep the old name".' in \
        result["content"]
    assert "2 of 3 hunks" in text  # the tool's summary line


def test_ask_a_takes_this_hunk_and_the_rest(daemon_env, scripted, workspace):
    run_ask(daemon_env, scripted, workspace, "all", [b"n\n", b"\n", b"a\n"])
    assert (workspace / "values.py").read_text() == THREE.replace(
        "v15 = 15", "renamed = 15").replace("v28 = 28", "v28 = 'twenty-eight'")
    (result,) = last_results(scripted, "all")
    assert "Rejected: hunk 1 of 3 (lines 1-5) (no message)." in result["content"]


def test_ask_d_rejects_this_hunk_and_the_rest(daemon_env, scripted, workspace):
    run_ask(daemon_env, scripted, workspace, "none", [b"y\n", b"d\n"])
    assert (workspace / "values.py").read_text() == THREE.replace("v2 = 2", "v2 = 'two'")
    (result,) = last_results(scripted, "none")
    assert "Applied: hunk 1 of 3 (lines 1-5)." in result["content"]
    assert "Rejected: hunk 3 of 3" in result["content"]


def test_ask_every_hunk_rejected_rejects_the_call(daemon_env, scripted, workspace):
    run_ask(daemon_env, scripted, workspace, "reject", [b"d\n"])
    assert (workspace / "values.py").read_text() == THREE
    (result,) = last_results(scripted, "reject")
    assert result["is_error"] and "The user rejected this MultiEdit call" in result["content"]
