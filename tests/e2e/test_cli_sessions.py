"""`heddle sessions` and `heddle ask -s PREFIX`: the real commands, their daemon and the
transcripts it keeps."""

from __future__ import annotations

import json
from pathlib import Path

from e2e.test_cli import heddle

ANSWER = {"content": [{"type": "text", "text": "Noted."}]}


def asked(workspace: Path, env: dict[str, str], prompt: str, *args: str) -> str:
    """The id of the session a completed `heddle ask` used."""
    result = heddle(["ask", "-w", str(workspace), "-m", "chat", *args, prompt], env)
    assert result.returncode == 0, result.stderr
    return result.stderr.rsplit(" session ", 1)[1].split()[0]


def two_sessions(scripted, env: dict[str, str], workspace: Path) -> tuple[str, str, Path]:
    """A session in `workspace` (its prompt two lines and an escape), then one in another
    folder: their ids, and that folder."""
    scripted.add_scenario("chat", {"steps": [ANSWER, ANSWER]})
    elsewhere = workspace.parent / "elsewhere"
    elsewhere.mkdir()
    return asked(workspace, env, "fix\nthe \x1b[2Jbug"), asked(elsewhere, env, "second"), elsewhere


def test_sessions_all_lists_every_session_newest_first(daemon_env, scripted, workspace):
    first, second, elsewhere = two_sessions(scripted, daemon_env, workspace)
    listed = heddle(["sessions", "--all"], daemon_env)
    assert listed.returncode == 0 and listed.stderr == "", listed.stderr
    heading, newest, oldest = listed.stdout.splitlines()
    assert heading.split() == ["ID", "LAST", "ACTIVE", "TURNS", "MODEL", "WORKSPACE", "TITLE"]
    assert newest.startswith(second[:8] + "  ") and oldest.startswith(first[:8] + "  ")
    assert newest.split()[3:] == ["1", "chat", str(elsewhere), "second"]
    # the title on one line, and what it holds cannot reach the terminal as an escape
    assert oldest.split()[3:] == ["1", "chat", str(workspace), "fix", "the", "\\x1b[2Jbug"]


def test_sessions_lists_the_workspaces_only(daemon_env, scripted, workspace):
    first, _, _ = two_sessions(scripted, daemon_env, workspace)
    listed = heddle(["sessions", "--json"], daemon_env, cwd=workspace)  # -w: the current folder
    assert listed.returncode == 0, listed.stderr
    assert [(s["sessionId"], s["workspace"], s["title"]) for s in json.loads(listed.stdout)] == [
        (first, str(workspace), "fix the \\x1b[2Jbug")]  # escaped by the daemon


def test_sessions_of_a_workspace_without_any(daemon_env, workspace, tmp_path):
    none = heddle(["sessions", "-w", str(workspace)], daemon_env)
    assert (none.returncode, none.stdout) == (0, "")
    assert none.stderr == f"heddle: no sessions in {workspace} yet\n"
    assert heddle(["sessions", "--json"], daemon_env, cwd=workspace).stdout == "[]\n"
    missing = heddle(["sessions", "-w", str(tmp_path / "missing")], daemon_env)
    assert (missing.returncode, missing.stderr) == (2, f"heddle: {tmp_path}/missing is not a "
                                                       "folder\n")


def with_a_twin(scripted, env: dict[str, str], workspace: Path) -> tuple[str, str]:
    """A session, and a second one whose id starts with the same 8 characters: ids are
    random, so the twin is the first's transcript copied under such an id (as a transcript
    from another machine would come)."""
    scripted.add_scenario("chat", {"steps": [ANSWER, ANSWER]})
    session = asked(workspace, env, "remember 42")
    twin = next(session[:8] + c * 24 for c in "01" if c != session[8])
    sessions = Path(env["XDG_STATE_HOME"]) / "heddle" / "sessions"
    (sessions / f"{twin}.jsonl").write_text(
        (sessions / f"{session}.jsonl").read_text().replace(session, twin))
    return session, twin


def test_ask_refuses_a_prefix_of_several_sessions_or_none(daemon_env, scripted, workspace):
    session, twin = with_a_twin(scripted, daemon_env, workspace)
    both = heddle(["ask", "-w", str(workspace), "-s", session[:8], "hi"], daemon_env)
    assert both.returncode == 2, both.stderr
    said = both.stderr.splitlines()
    assert said[0] == (f"heddle: 2 sessions have an id that starts with '{session[:8]}'; give "
                       "more of it:")
    assert sorted(line.split()[0] for line in said[2:]) == sorted([session, twin])
    assert all(str(workspace) in line for line in said[2:])

    unknown = heddle(["ask", "-w", str(workspace), "-s", "zz", "hi"], daemon_env)
    assert unknown.returncode == 2
    assert unknown.stderr.startswith(f"heddle: no session id starts with 'zz'; the latest "
                                     f"sessions of {workspace}:\n"), unknown.stderr
    assert session[:8] in unknown.stderr and twin[:8] in unknown.stderr
    assert len(scripted.requests_for("chat")) == 1  # neither reached the model


def test_ask_continues_the_session_a_unique_prefix_names(daemon_env, scripted, workspace):
    session, _ = with_a_twin(scripted, daemon_env, workspace)
    again = heddle(["ask", "-w", str(workspace), "-s", session[:9], "what number?"], daemon_env)
    assert again.returncode == 0, again.stderr
    assert f"[continuing session {session}: remember 42 (1 turn)]" in again.stderr
    sent = scripted.requests_for("chat")[-1].body["messages"]
    assert sent[0]["content"][-1]["text"] == "remember 42"
