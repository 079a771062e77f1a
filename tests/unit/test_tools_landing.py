"""Where Edit, MultiEdit and Write land: the editor for an open document when the client can
apply edits (an `Editor` that keeps its own buffers here), else the disk; and reviewed edits."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from heddle.core.hunks import HunkDecision, review, split
from heddle.core.tools import Buffer, ToolContext, ToolError
from heddle.tools.documents import EditorDocuments
from heddle.tools.edits import MultiEdit, Write
from heddle.tools.files import Edit


class Buffers:
    """An `Editor` that applies whole texts to the documents it was given, at their version."""

    def __init__(self, docs: EditorDocuments, refuse: str | None = None):
        self.docs, self.refuse = docs, refuse
        self.applied: list[tuple[Buffer, str, str]] = []

    async def apply(self, buffer: Buffer, new_text: str, label: str) -> str | None:
        self.applied.append((buffer, new_text, label))
        if self.refuse:
            return self.refuse
        path = Path(buffer.uri.removeprefix("file://"))
        self.docs.change(path, new_text, buffer.version + 1)
        return None


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    (tmp_path / "a.py").write_text("one\ntwo\n")
    return ToolContext(tmp_path.resolve(), documents=EditorDocuments())


def inp(tool, ctx, **raw):
    return tool.normalise(msgspec.convert(raw, tool.input_type), ctx)


async def test_open_documents_change_in_the_editor_from_the_buffers_text(ctx):
    docs = ctx.documents
    editor = Buffers(docs)
    docs.editor_source = lambda: editor
    path = ctx.workspace / "a.py"
    docs.open(path, "one\ntwo\n# typing\n", 5)
    out = await Edit().run(inp(Edit(), ctx, path="a.py", old_string="two", new_string="2"), ctx)
    assert out.content.startswith("Edited a.py (1 replacement).\n(You had not read a.py")
    ((buffer, text, label),) = editor.applied
    assert buffer.version == 5 and text == "one\n2\n# typing\n" and label == "Heddle: Edit a.py"
    assert docs.text(path) == text and path.read_text() == "one\ntwo\n"
    await Write().run(inp(Write(), ctx, path="new.txt", content="x\n"), ctx)  # not open: disk
    assert (ctx.workspace / "new.txt").read_text() == "x\n" and len(editor.applied) == 1
    draft = ctx.workspace / "draft.py"  # a new, empty buffer: Edit creates it in the editor
    docs.open(draft, "", 1)
    out = await Edit().run(inp(Edit(), ctx, path="draft.py", old_string="", new_string="x\n"),
                           ctx)
    assert out.content == "Created draft.py." and docs.text(draft) == "x\n"
    assert not draft.exists()


async def test_a_refused_edit_is_a_tool_error_that_quotes_the_editor(ctx):
    editor = Buffers(ctx.documents, refuse="the buffer is busy")
    ctx.documents.editor_source = lambda: editor
    ctx.documents.open(ctx.workspace / "a.py", "one\ntwo\n", 1)
    edits = [{"old_string": "one", "new_string": "1"}]
    with pytest.raises(ToolError, match=r"^The editor did not apply the edit to a.py: the "
                       r"buffer is busy. Read the file again before editing it.$"):
        await MultiEdit().run(inp(MultiEdit(), ctx, path="a.py", edits=edits), ctx)


async def test_a_reviewed_edit_writes_the_users_choice_unless_the_file_moved(ctx):
    path = ctx.workspace / "a.py"
    before = "".join(f"{i}\n" for i in range(20))
    path.write_text(before)
    after = before.replace("1\n", "one\n", 1).replace("18\n", "eighteen\n")
    hunks = split(before, after)
    chosen = review(before, after, hunks, [HunkDecision(1, "reject", "no")], None)
    call = inp(Write(), ctx, path="a.py", content=after)
    out = await Write().run_reviewed(call, ctx, chosen)
    assert path.read_text() == before.replace("1\n", "one\n", 1) and out.summary == "1 of 2 hunks"
    with pytest.raises(ToolError, match="a.py changed while the user was reviewing the edit"):
        await Write().run_reviewed(call, ctx, chosen)  # the file is no longer `before`
