"""Edits of open documents through the editor (`workspace/applyEdit`), Read of the buffer, and
review of an edit hunk by hunk or with the user's own text — through the real daemon, with a
test client that keeps its own buffers and answers `workspace/applyEdit` as an editor does."""

from __future__ import annotations

import asyncio
import difflib
from pathlib import Path
from typing import Any, Callable

import pytest
from lsprotocol import types as lsp_types
from pytest_lsp import ClientServerConfig

from buffers import apply_edits
from e2e import lsp
from e2e.test_permissions import DONE, last_results, tool
from e2e.test_turns import new_session
from heddle.rpc.pygls_adapter import converter

CONVERTER = converter()
STALE = "the file changed in the editor since the agent read it"


class Editor:
    """The test client's buffers: what it opened, at which version, and the edits it got."""

    def __init__(self, client: lsp.HeddleTestClient):
        self.client = client
        self.buffers: dict[str, tuple[str, int]] = {}
        self.requests: list[dict] = []
        self.answer: Callable[[dict], Any] = self.apply

    def open(self, path: Path, text: str, version: int = 1) -> None:
        self.buffers[path.as_uri()] = (text, version)
        self.client.text_document_did_open(lsp_types.DidOpenTextDocumentParams(
            lsp_types.TextDocumentItem(uri=path.as_uri(), language_id="python", version=version,
                                       text=text)))

    def type(self, path: Path, text: str, tell: bool = True) -> None:
        """The user changes the buffer (`tell=False`: its didChange is still on its way)."""
        uri = path.as_uri()
        version = self.buffers[uri][1] + 1
        self.buffers[uri] = (text, version)
        if tell:
            self.client.text_document_did_change(lsp_types.DidChangeTextDocumentParams(
                lsp_types.VersionedTextDocumentIdentifier(version=version, uri=uri),
                [lsp_types.TextDocumentContentChangeWholeDocument(text=text)]))

    def text(self, path: Path) -> str:
        return self.buffers[path.as_uri()][0]

    def apply(self, params: dict) -> dict:
        """What an editor does: refuse an edit made for another version, else apply it."""
        (change,) = params["edit"]["documentChanges"]
        uri, version = change["textDocument"]["uri"], change["textDocument"]["version"]
        text, current = self.buffers[uri]
        if version != current:
            return {"applied": False, "failureReason": STALE}
        self.buffers[uri] = (apply_edits(text, change["edits"]), current + 1)
        self.type_after_edit(uri)
        return {"applied": True}

    def type_after_edit(self, uri: str) -> None:
        text, version = self.buffers[uri]
        self.client.text_document_did_change(lsp_types.DidChangeTextDocumentParams(
            lsp_types.VersionedTextDocumentIdentifier(version=version, uri=uri),
            [lsp_types.TextDocumentContentChangeWholeDocument(text=text)]))


def client_factory(editors: list[Editor], kind: type[Editor] = Editor):
    def make() -> lsp.HeddleTestClient:
        client = lsp.make_client()
        editor = kind(client)
        editors.append(editor)

        @client.feature("workspace/applyEdit")
        async def on_apply(params):
            if not isinstance(params, dict):  # pygls gives an LSP method's params as its type
                params = CONVERTER.unstructure(params)
            editor.requests.append(params)
            result = editor.answer(params)
            return await result if asyncio.iscoroutine(result) else result
        return client
    return make


async def start(env: dict, command: list[str], apply_edit: bool = True) -> Editor:
    editors: list[Editor] = []
    config = ClientServerConfig(server_command=command, client_factory=client_factory(editors),
                                server_env=env)
    client = await config.start()
    caps = lsp_types.ClientCapabilities(
        workspace=lsp_types.WorkspaceClientCapabilities(
            apply_edit=apply_edit,
            workspace_edit=lsp_types.WorkspaceEditClientCapabilities(document_changes=apply_edit)),
        experimental={"heddle": {"permissionRequests": True, "reviewHunks": True}})
    await asyncio.wait_for(client.initialize_session(lsp_types.InitializeParams(
        capabilities=caps)), 20)
    return editors[0]


@pytest.fixture
async def editor(daemon_env, daemon_command):
    e = await start(daemon_env, daemon_command)
    yield e
    await lsp.stop(e.client)


def unified(before: str, after: str) -> str:
    return "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True),
                                        fromfile="a/app.py", tofile="b/app.py"))


async def run_turn(editor: Editor, scripted, workspace: Path, model: str, calls: list[dict],
                   mode: str = "acceptEdits") -> dict:
    scripted.add_scenario(model, {"steps": [{"content": calls}, DONE]})
    sid = await new_session(editor.client, workspace, model, permissionMode=mode)
    return await editor.client.call("turn/start", {"sessionId": sid, "prompt": "go"})


# --- through the editor ----------------------------------------------------------------------

async def test_an_edit_of_an_unsaved_buffer_keeps_the_users_text(editor, scripted, workspace):
    app = workspace / "app.py"
    on_disk = app.read_text()
    editor.open(app, on_disk)
    typed = on_disk + "# the user is typing\n"
    editor.type(app, typed)  # version 2, unsaved
    await run_turn(editor, scripted, workspace, "edit", [
        tool("Read", path="app.py"),
        tool("Edit", path="app.py", old_string="'Hello, ' + name", new_string="f'Hi {name}'")])

    read, edited = last_results(scripted, "edit")
    assert read["content"].startswith(
        "The editor has unsaved changes to app.py; this is the editor's text, not the file on "
        "disk.\n     1\tdef greet(name):\n")
    assert "     6\t# the user is typing" in read["content"]
    assert not edited["is_error"] and edited["content"] == "Edited app.py (1 replacement)."
    (request,) = editor.requests
    assert request["label"] == "Heddle: Edit app.py"
    (change,) = request["edit"]["documentChanges"]
    assert change["textDocument"] == {"uri": app.as_uri(), "version": 2}
    assert change["edits"] == [{  # the changed line only, not the whole document
        "range": {"start": {"line": 1, "character": 0}, "end": {"line": 2, "character": 0}},
        "newText": "    return f'Hi {name}'\n"}]
    assert editor.text(app) == typed.replace("'Hello, ' + name", "f'Hi {name}'")
    assert app.read_text() == on_disk  # the disk is the editor's business
    (finished,) = [e for e in editor.client.turn_events("toolCallFinished") if e["tool"] == "Edit"]
    assert finished["status"] == "ok"
    assert finished["diff"] == unified(typed, editor.text(app))


async def test_a_clean_open_file_is_edited_in_the_editor_too(editor, scripted, workspace):
    notes = workspace / "notes.txt"
    notes.write_text("one\ntwo")  # no final newline
    editor.open(notes, "one\ntwo", version=7)
    await run_turn(editor, scripted, workspace, "write", [
        tool("Read", path="notes.txt"), tool("Write", path="notes.txt", content="one\n2\n")])
    _, result = last_results(scripted, "write")
    assert not result["is_error"], result
    (change,) = editor.requests[0]["edit"]["documentChanges"]
    assert change["textDocument"]["version"] == 7
    assert change["edits"] == [{
        "range": {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 3}},
        "newText": "2\n"}]
    assert editor.text(notes) == "one\n2\n" and notes.read_text() == "one\ntwo"


async def test_the_editor_refusing_the_edit_is_a_tool_error(editor, scripted, workspace):
    app = workspace / "app.py"
    on_disk = app.read_text()
    editor.open(app, on_disk)
    editor.type(app, on_disk + "# more\n", tell=False)  # typed; the didChange is not there yet
    edit = tool("Edit", path="app.py", old_string="'Hello, ' + name", new_string="name")
    await run_turn(editor, scripted, workspace, "stale", [edit])

    (result,) = last_results(scripted, "stale")
    assert result["is_error"] and result["content"] == (
        f"The editor did not apply the edit to app.py: {STALE}. Read the file again before "
        "editing it.")
    assert editor.requests[0]["edit"]["documentChanges"][0]["textDocument"]["version"] == 1
    assert editor.text(app) == on_disk + "# more\n" and app.read_text() == on_disk
    finished = editor.client.turn_events("toolCallFinished")[-1]
    assert finished["status"] == "error" and STALE in finished["summary"]

    def refuse(params):
        raise RuntimeError("the buffer is read-only")
    editor.answer = refuse
    await run_turn(editor, scripted, workspace, "refused", [edit])
    (result,) = last_results(scripted, "refused")
    assert result["is_error"] and result["content"].startswith(
        "The editor did not apply the edit to app.py: it answered with an error: ")
    assert "the buffer is read-only" in result["content"]
    assert app.read_text() == on_disk

    editor.answer = lambda params: {"applied": "yes"}  # not an ApplyWorkspaceEditResult
    await run_turn(editor, scripted, workspace, "garbled", [edit])
    (result,) = last_results(scripted, "garbled")
    assert result["is_error"] and result["content"].startswith(
        "The editor did not apply the edit to app.py: its answer was invalid: Expected `bool`")
    assert app.read_text() == on_disk and editor.text(app) == on_disk + "# more\n"


async def test_no_answer_to_apply_edit_is_a_tool_error(daemon_env, daemon_command, scripted,
                                                       workspace):
    editor = await start(dict(daemon_env, HEDDLE_APPLY_EDIT_TIMEOUT="0.5"), daemon_command)
    never = asyncio.Event()
    try:
        app = workspace / "app.py"
        on_disk = app.read_text()
        editor.open(app, on_disk)

        async def silent(params):
            await never.wait()
        editor.answer = silent
        await run_turn(editor, scripted, workspace, "silent", [
            tool("Edit", path="app.py", old_string="'Hello, ' + name", new_string="name")])
        (result,) = last_results(scripted, "silent")
        assert result["is_error"] and result["content"] == (
            "The editor did not apply the edit to app.py: no answer within 0.5 s "
            "(HEDDLE_APPLY_EDIT_TIMEOUT). Read the file again before editing it.")
        assert app.read_text() == on_disk and editor.text(app) == on_disk
    finally:
        never.set()
        await lsp.stop(editor.client)


async def test_without_apply_edit_open_files_are_written_to_disk(daemon_env, daemon_command,
                                                                 scripted, workspace):
    editor = await start(daemon_env, daemon_command, apply_edit=False)
    try:
        app = workspace / "app.py"
        on_disk = app.read_text()
        editor.open(app, on_disk + "# typing\n")
        edit = tool("Edit", path="app.py", old_string="'Hello, ' + name", new_string="name")
        await run_turn(editor, scripted, workspace, "plain", [tool("Read", path="app.py"), edit])
        read, refused = last_results(scripted, "plain")
        assert "     6\t# typing" in read["content"]  # Read sees the buffer all the same
        assert refused["is_error"] and "app.py has unsaved changes in the editor" in \
            refused["content"]
        editor.type(app, on_disk)  # the user undid their typing: clean again
        await run_turn(editor, scripted, workspace, "plain2", [edit])
        assert last_results(scripted, "plain2")[0]["content"].startswith(
            "Edited app.py (1 replacement).\n(You had not read app.py in this session")
        assert "return name" in app.read_text() and editor.requests == []
    finally:
        await lsp.stop(editor.client)


# --- review ----------------------------------------------------------------------------------

THREE = "".join(f"v{i} = {i}\n" for i in range(1, 31))
THREE_EDITS = [{"old_string": "v2 = 2", "new_string": "v2 = 'two'"},
               {"old_string": "v15 = 15", "new_string": "renamed = 15"},
               {"old_string": "v28 = 28", "new_string": "v28 = 'twenty-eight'"}]


def multi_edit() -> dict:
    return tool("MultiEdit", path="values.py", edits=THREE_EDITS)


async def test_some_hunks_accepted_one_rejected_with_a_message(editor, scripted, workspace):
    values = workspace / "values.py"
    values.write_text(THREE)
    editor.client.answer = lambda params: {"decision": "allowOnce", "hunks": [
        {"index": 1, "decision": "reject", "message": "keep the old name"}]}
    await run_turn(editor, scripted, workspace, "hunks", [multi_edit()], mode="default")

    (request,) = editor.client.permission_requests
    preview = request["preview"]
    after = THREE.replace("v2 = 2", "v2 = 'two'").replace("v15 = 15", "renamed = 15") \
        .replace("v28 = 28", "v28 = 'twenty-eight'")
    assert preview["before"] == THREE and preview["after"] == after
    assert [(h["index"], h["oldStart"], h["oldLines"], h["newStart"], h["newLines"])
            for h in preview["hunks"]] == [(0, 1, 5, 1, 5), (1, 12, 7, 12, 7), (2, 25, 6, 25, 6)]
    assert "".join(h["diff"] for h in preview["hunks"]) == preview["diff"].split("\n", 2)[2]
    written = THREE.replace("v2 = 2", "v2 = 'two'").replace("v28 = 28", "v28 = 'twenty-eight'")
    assert values.read_text() == written

    (result,) = last_results(scripted, "hunks")
    assert not result["is_error"]
    assert result["content"].startswith(
        "Edited values.py with 2 of 3 hunks of your change; the user rejected the other, so the "
        "file is not what you proposed.\n"
        "Applied: hunk 1 of 3 (lines 1-5), hunk 3 of 3 (lines 25-30).\n"
        'Rejected: hunk 2 of 3 (lines 12-18), the user said: "keep the old name".\n')
    assert "-renamed = 15\n+v15 = 15\n" in result["content"]
    (answered,) = editor.client.turn_events("permissionAnswered")
    assert answered["hunks"] == [
        {"index": 0, "decision": "accept"},
        {"index": 1, "decision": "reject", "message": "keep the old name"},
        {"index": 2, "decision": "accept"}]
    assert "edited" not in answered
    (finished,) = editor.client.turn_events("toolCallFinished")
    assert finished["summary"] == "2 of 3 hunks"
    assert finished["diff"] == "".join(difflib.unified_diff(
        THREE.splitlines(True), written.splitlines(True), "a/values.py", "b/values.py"))


async def test_partial_hunks_of_an_open_document_go_through_the_editor(editor, scripted,
                                                                      workspace):
    values = workspace / "values.py"
    values.write_text(THREE)
    typed = THREE + "# unsaved\n"
    editor.open(values, typed, version=4)
    editor.client.answer = lambda params: {"decision": "allowOnce", "hunks": [
        {"index": 0, "decision": "reject"}]}
    await run_turn(editor, scripted, workspace, "open-hunks", [multi_edit()], mode="default")
    assert editor.client.permission_requests[0]["preview"]["before"] == typed
    (request,) = editor.requests
    assert request["edit"]["documentChanges"][0]["textDocument"]["version"] == 4
    assert len(request["edit"]["documentChanges"][0]["edits"]) == 2  # one per applied hunk
    assert editor.text(values) == typed.replace("v15 = 15", "renamed = 15").replace(
        "v28 = 28", "v28 = 'twenty-eight'")
    assert values.read_text() == THREE
    (result,) = last_results(scripted, "open-hunks")
    assert "Rejected: hunk 1 of 3 (lines 1-5) (no message)." in result["content"]


async def test_the_users_own_text_is_written_and_told(editor, scripted, workspace):
    values = workspace / "values.py"
    values.write_text(THREE)
    mine = THREE.replace("v2 = 2", "v2 = 'deux'")
    editor.client.answer = lambda params: {"decision": "allowOnce", "finalText": mine,
                                           "hunks": [{"index": 0, "decision": "reject"}]}
    await run_turn(editor, scripted, workspace, "final", [multi_edit()], mode="default")
    assert values.read_text() == mine
    (result,) = last_results(scripted, "final")
    assert result["content"].startswith(
        "Edited values.py with the user's own version of your change: the user edited the "
        "proposal before accepting it, so the file is not what you proposed.\n"
        "The diff from your proposal to what was written:\n")
    assert "-v2 = 'two'\n+v2 = 'deux'\n" in result["content"]
    assert "-renamed = 15\n+v15 = 15\n" in result["content"]
    (answered,) = editor.client.turn_events("permissionAnswered")
    assert answered["edited"] is True and "hunks" not in answered


async def test_every_hunk_rejected_is_a_rejection(editor, scripted, workspace):
    values = workspace / "values.py"
    values.write_text(THREE)
    editor.client.answer = lambda params: {"decision": "allowOnce", "hunks": [
        {"index": 0, "decision": "reject", "message": "not this"},
        {"index": 1, "decision": "reject"},
        {"index": 2, "decision": "reject", "message": "nor this"}]}
    await run_turn(editor, scripted, workspace, "none", [multi_edit()], mode="default")
    assert values.read_text() == THREE
    (result,) = last_results(scripted, "none")
    assert result["is_error"] and result["content"] == (
        "The user rejected this MultiEdit call and said: not this; nor this")
    (answered,) = editor.client.turn_events("permissionAnswered")
    assert answered["decision"] == "reject" and len(answered["hunks"]) == 3


@pytest.mark.parametrize("answer, why", [
    ({"hunks": [{"index": 3, "decision": "reject"}]}, "hunk index 3 is not one of the 3 hunks"),
    ({"hunks": [{"index": 1, "decision": "reject"}, {"index": 1, "decision": "accept"}]},
     "hunk 1 is answered twice"),
    ({"finalText": 42}, "Expected `str | null`, got `int`"),
])
async def test_an_invalid_review_is_a_rejection(editor, scripted, workspace, answer, why):
    values = workspace / "values.py"
    values.write_text(THREE)
    editor.client.answer = lambda params: {"decision": "allowOnce", **answer}
    await run_turn(editor, scripted, workspace, "invalid", [multi_edit()], mode="default")
    assert values.read_text() == THREE
    (result,) = last_results(scripted, "invalid")
    assert result["is_error"] and "the editor's answer was invalid: " in result["content"]
    assert why in result["content"]
    assert editor.client.turn_events("toolCallFinished")[0]["status"] == "rejected"


async def test_a_file_changed_during_review_is_not_clobbered(editor, scripted, workspace):
    values = workspace / "values.py"
    values.write_text(THREE)
    editor.open(values, THREE)

    def meanwhile(params):
        editor.type(values, "# the user typed during the review\n" + THREE)
        return {"decision": "allowOnce", "hunks": [{"index": 2, "decision": "reject"}]}
    editor.client.answer = meanwhile
    await run_turn(editor, scripted, workspace, "during", [multi_edit()], mode="default")
    (result,) = last_results(scripted, "during")
    assert result["is_error"] and result["content"] == (
        "values.py changed while the user was reviewing the edit, so nothing was written. "
        "Read it again and redo the edit.")
    assert editor.requests == [] and values.read_text() == THREE
    assert editor.text(values) == "# the user typed during the review\n" + THREE


async def test_the_event_stream_carries_the_diff_not_the_texts(editor, scripted, workspace):
    (workspace / "values.py").write_text(THREE)
    editor.client.answer = lambda params: {"decision": "reject"}
    await run_turn(editor, scripted, workspace, "asked", [multi_edit()], mode="default")
    (asked,) = editor.client.turn_events("permissionAsked")
    assert set(asked["preview"]) == {"kind", "path", "diff"}
    assert asked["preview"]["diff"] == editor.client.permission_requests[0]["preview"]["diff"]
