"""The editor's new errors and warnings in the result of an edit (`diagnostics/list`), through
the real daemon, with a test client that keeps its own buffers, applies edits and plays a
language server: each applied edit is checked at once and its diagnostics are reported."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Callable

import pytest
from lsprotocol import types as lsp_types
from pytest_lsp import ClientServerConfig

from e2e import lsp
from e2e.test_editor_edits import THREE, Editor, client_factory
from e2e.test_permissions import DONE, last_results, tool, write_settings
from e2e.test_turns import new_session

NOTE = ("They were not there before this edit. Fix the ones your change caused, unless your "
        "next edits resolve them.")


TURN_BOUND = 45
"""Seconds a turn may take: a fresh daemon's first model call waits for the SDK's warm-up,
which takes seconds on a loaded machine (a turn here takes about one)."""


async def run_turn(editor: Editor, scripted, workspace: Path, model: str, calls: list[dict],
                   mode: str = "acceptEdits") -> dict:
    # the agent reads the file first, as it must before it overwrites it (docs/tools.md)
    scripted.add_scenario(model, {"steps": [{"content": [tool("Read", path="app.py")]},
                                            {"content": calls}, DONE]})
    sid = await new_session(editor.client, workspace, model, permissionMode=mode)
    return await editor.client.call("turn/start", {"sessionId": sid, "prompt": "go"},
                                    timeout=TURN_BOUND)


def diagnostic(line: int, message: str, severity: int = 1, source: str | None = "pyflakes",
               code: str | None = None) -> dict:
    d = {"range": {"start": {"line": line, "character": 4}, "end": {"line": line, "character": 7}},
         "severity": severity, "message": message}
    return d | ({"source": source} if source else {}) | ({"code": code} if code else {})


def lint(text: str) -> list[dict]:
    """The test's language server: `foo` is undefined, `print(` is frowned upon."""
    found = []
    for i, line in enumerate(text.splitlines()):
        found += [diagnostic(i, "undefined name 'foo'")] * line.count("foo")
        if "print(" in line:
            found.append(diagnostic(i, "print found", 2, "flake8-print", "T201"))
    return found


class CheckingEditor(Editor):
    """An editor with a language server that checks each buffer as soon as it changes."""

    def __init__(self, client: lsp.HeddleTestClient):
        super().__init__(client)
        self.check: Callable[[str], list[dict]] = lint
        self.checking = True
        """False: the language server never reports again (a file type nothing checks)."""
        self.reports: dict[str, tuple[list[dict], int]] = {}
        self.asked: list[dict] = []
        self.on_ask: Callable[[dict], Any] = self.answer_diagnostics

    def open(self, path: Path, text: str, version: int = 1) -> None:
        super().open(path, text, version)
        self.publish(path.as_uri())

    def type_after_edit(self, uri: str) -> None:
        super().type_after_edit(uri)
        if self.checking:
            self.publish(uri)

    def publish(self, uri: str) -> None:
        generation = self.reports.get(uri, ([], 0))[1]
        self.reports[uri] = (self.check(self.buffers[uri][0]), generation + 1)

    def answer_diagnostics(self, params: dict) -> dict:
        diagnostics, generation = self.reports.get(params["uri"], ([], 0))
        return {"diagnostics": diagnostics, "generation": generation}


async def start(env: dict, command: list[str], declare: bool = True) -> CheckingEditor:
    editors: list[CheckingEditor] = []
    config = ClientServerConfig(server_command=command, server_env=env,
                                client_factory=client_factory(editors, CheckingEditor))
    client = await config.start()
    editor = editors[0]

    @client.feature("diagnostics/list")
    async def on_diagnostics(params):
        editor.asked.append(params)
        result = editor.on_ask(params)
        return await result if asyncio.iscoroutine(result) else result

    heddle = {"permissionRequests": True} | ({"diagnosticRequests": True} if declare else {})
    caps = lsp_types.ClientCapabilities(
        workspace=lsp_types.WorkspaceClientCapabilities(
            apply_edit=True,
            workspace_edit=lsp_types.WorkspaceEditClientCapabilities(document_changes=True)),
        experimental={"heddle": heddle})
    await asyncio.wait_for(client.initialize_session(lsp_types.InitializeParams(
        capabilities=caps)), 20)
    return editor


@pytest.fixture
async def editor(daemon_env, daemon_command):
    e = await start(daemon_env, daemon_command)
    yield e
    await lsp.stop(e.client)


async def test_new_errors_and_warnings_are_told_and_old_ones_are_not(editor, scripted,
                                                                      workspace):
    app = workspace / "app.py"
    editor.open(app, app.read_text())
    assert editor.reports[app.as_uri()][0] == [  # there before the edit: not told
        diagnostic(4, "print found", 2, "flake8-print", "T201")]
    result = await run_turn(editor, scripted, workspace, "lint", [
        tool("Edit", path="app.py", old_string="'Hello, ' + name",
             new_string="'Hello, ' + foo\n    print(foo)")])

    assert result["reason"] == "completed"
    (edited,) = last_results(scripted, "lint")
    assert not edited["is_error"] and edited["content"] == (
        "Edited app.py (1 replacement).\n\n"
        "The editor now reports 2 new errors and 1 new warning in app.py:\n"
        "  line 2: error: undefined name 'foo' (pyflakes)\n"
        "  line 3: error: undefined name 'foo' (pyflakes)\n"
        "  line 3: warning: print found (flake8-print, T201)\n" + NOTE)
    # before the edit, then until two answers agree after it
    assert editor.asked == [{"uri": app.as_uri()}] * 3
    finished = editor.client.turn_events("toolCallFinished")[-1]  # after the Read
    assert finished["status"] == "ok" and finished["summary"] == "1 replacement"


async def test_at_most_ten_problems_are_listed(editor, scripted, workspace):
    app = workspace / "app.py"
    editor.open(app, app.read_text())
    content = "".join(f"v{i} = foo\n" for i in range(13))
    await run_turn(editor, scripted, workspace, "cap", [
        tool("Write", path="app.py", content=content)])
    (written,) = last_results(scripted, "cap")
    listed = "".join(f"  line {i + 1}: error: undefined name 'foo' (pyflakes)\n"
                     for i in range(10))
    assert written["content"] == (
        "Wrote app.py (13 lines).\n\n"
        f"The editor now reports 13 new errors in app.py:\n{listed}  … and 3 more\n{NOTE}")


async def test_an_edit_that_fixes_problems_reports_nothing(editor, scripted, workspace):
    app = workspace / "app.py"
    editor.open(app, app.read_text())
    await run_turn(editor, scripted, workspace, "fix", [
        tool("Edit", path="app.py", old_string="print(greet('world'))",
             new_string="greet('world')")])
    (edited,) = last_results(scripted, "fix")
    assert edited["content"] == "Edited app.py (1 replacement)."
    assert editor.reports[app.as_uri()] == ([], 2) and len(editor.asked) == 3


def never_answer(release: asyncio.Event):
    async def answer(params: dict):
        await release.wait()
    return answer


def refuse(params: dict):
    raise RuntimeError("no diagnostics here")


def after_the_edit(answer: Callable[[dict], Any], editor: CheckingEditor):
    """The first answer as it should be, then `answer`."""
    return lambda params: (editor.answer_diagnostics(params) if len(editor.asked) == 1
                           else answer(params))


FAILURES: dict[str, Callable[[CheckingEditor, asyncio.Event], Callable[[dict], Any]]] = {
    "no answer": lambda e, release: never_answer(release),
    "an error": lambda e, release: refuse,
    "not diagnostics": lambda e, release: (lambda params: {"diagnostics": "none"}),
    "a bad severity": lambda e, release: (lambda params: {
        "diagnostics": [diagnostic(1, "undefined name 'foo'", severity=9)]}),
    "no answer after the edit": lambda e, release: after_the_edit(never_answer(release), e),
    "an error after the edit": lambda e, release: after_the_edit(refuse, e),
    "garbage after the edit": lambda e, release: after_the_edit(lambda params: [1, 2], e),
}


@pytest.mark.parametrize("failure", FAILURES)
async def test_an_editor_that_does_not_answer_well_leaves_the_result_alone(
        editor, scripted, workspace, tmp_path, failure):
    release = asyncio.Event()
    editor.on_ask = FAILURES[failure](editor, release)
    app = workspace / "app.py"
    editor.open(app, app.read_text())
    try:
        result = await run_turn(editor, scripted, workspace, "fails", [
            tool("Edit", path="app.py", old_string="'Hello, ' + name", new_string="foo")])
    finally:
        release.set()
    assert result["reason"] == "completed" and result["text"] == "Done."
    (edited,) = last_results(scripted, "fails")
    assert not edited["is_error"] and edited["content"] == "Edited app.py (1 replacement)."
    assert "foo" in editor.text(app)
    # no question after the one that failed (which a client the machine's load keeps from
    # answering within 1 s may not even have seen: the daemon withdrew it)
    assert len(editor.asked) <= (2 if "after" in failure else 1)
    log = (tmp_path / "heddle.log").read_text()
    assert f"no diagnostics of {app.as_uri()} " in log
    if len(editor.asked) == 2:
        assert f"no diagnostics of {app.as_uri()} after the edit" in log


@pytest.mark.parametrize("why", ["not declared", "diagnostics_wait = 0"])
async def test_no_question_without_the_capability_or_with_the_setting_at_zero(
        daemon_env, daemon_command, scripted, workspace, why):
    if why != "not declared":  # (and it wins over the daemon's environment)
        write_settings(workspace / ".heddle" / "settings.toml", f"[editor]\n{why}\n")
        daemon_env = dict(daemon_env, HEDDLE_DIAGNOSTICS_WAIT="5")
    editor = await start(daemon_env, daemon_command, declare=why != "not declared")
    try:
        app = workspace / "app.py"
        editor.open(app, app.read_text())
        await run_turn(editor, scripted, workspace, "quiet", [
            tool("Edit", path="app.py", old_string="'Hello, ' + name", new_string="foo")])
        (edited,) = last_results(scripted, "quiet")
        assert edited["content"] == "Edited app.py (1 replacement)."
        assert editor.requests and editor.asked == []  # edited in the editor, never asked
    finally:
        await lsp.stop(editor.client)


@pytest.mark.timeout(150)  # a cold daemon's first model call, on a loaded machine, then the wait
async def test_a_cancel_during_the_wait_ends_the_turn_at_once(daemon_env, daemon_command,
                                                             scripted, workspace):
    # nothing ever checks the file again, so the daemon would ask for 120 s
    editor = await start(dict(daemon_env, HEDDLE_DIAGNOSTICS_WAIT="120"), daemon_command)
    try:
        editor.checking = False
        polling = asyncio.Event()

        def answer(params: dict) -> dict:
            if len(editor.asked) == 3:  # the baseline, then two questions after the edit
                polling.set()
            return editor.answer_diagnostics(params)
        editor.on_ask = answer
        app = workspace / "app.py"
        editor.open(app, app.read_text())
        turn = asyncio.ensure_future(run_turn(editor, scripted, workspace, "slow", [
            tool("Edit", path="app.py", old_string="'Hello, ' + name", new_string="foo")]))
        await asyncio.wait_for(polling.wait(), 90)
        editor.client.protocol.notify("turn/cancel",
                                      {"sessionId": editor.client.events[0]["sessionId"]})
        result = await asyncio.wait_for(turn, 15)
        assert (result["reason"], result["cancelPhase"]) == ("cancelled", "tools")
        finished = editor.client.turn_events("toolCallFinished")[-1]  # after the Read
        assert finished["status"] == "cancelled"
        assert "foo" in editor.text(app)  # the edit itself had landed
    finally:
        await lsp.stop(editor.client)


async def test_a_reviewed_edit_tells_the_problems_of_what_was_written(editor, scripted,
                                                                      workspace):
    values = workspace / "values.py"
    values.write_text(THREE)
    editor.open(values, THREE)
    editor.client.answer = lambda params: {"decision": "allowOnce", "hunks": [
        {"index": 1, "decision": "reject"}]}
    edits = [{"old_string": "v2 = 2", "new_string": "v2 = foo"},
             {"old_string": "v28 = 28", "new_string": "v28 = foo"}]
    await run_turn(editor, scripted, workspace, "reviewed",
                   [tool("MultiEdit", path="values.py", edits=edits)], mode="default")
    (result,) = last_results(scripted, "reviewed")
    assert result["content"].startswith("Edited values.py with 1 of 2 hunks of your change")
    assert result["content"].endswith(
        "\n\nThe editor now reports 1 new error in values.py:\n"
        "  line 2: error: undefined name 'foo' (pyflakes)\n" + NOTE)
    assert len(editor.asked) == 3
