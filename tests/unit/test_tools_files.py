"""Read, Edit, Write and MultiEdit: happy paths, errors, line endings, unsaved editor buffers."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import msgspec
import pytest

from heddle.core.tools import ToolContext, ToolError
from heddle.tools.documents import EditorDocuments
from heddle.tools.edits import MultiEdit, Write
from heddle.tools.files import MAX_LINE_CHARS, Edit, Read


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    (tmp_path / "a.py").write_text("one\ntwo\nthree\ntwo\n")
    return ToolContext(tmp_path.resolve(), documents=EditorDocuments())


def norm(tool, ctx, **raw):
    return tool.normalise(msgspec.convert(raw, tool.input_type), ctx)


async def run(tool, ctx, **raw):
    return await tool.run(norm(tool, ctx, **raw), ctx)


# --- Read -----------------------------------------------------------------------------------

async def test_read_whole_file_and_summary(ctx):
    out = await run(Read(), ctx, path="a.py")
    assert out.content == "     1\tone\n     2\ttwo\n     3\tthree\n     4\ttwo"
    assert out.summary == "4 lines"


async def test_read_pages_large_files_by_size(ctx):
    (ctx.workspace / "big.txt").write_text("".join(f"{'x' * 999}\n" for _ in range(300)))
    first = await run(Read(), ctx, path="big.txt")
    assert len(first.content) <= Read.max_result_chars
    shown = len(re.findall(r"^ *\d+\t", first.content, re.M))
    assert 90 < shown < 300
    assert f"(lines 1-{shown} of 300; read on with offset={shown + 1})" in first.content
    rest = await run(Read(), ctx, path="big.txt", offset=shown + 1)
    assert rest.content.startswith(f"{shown + 1:>6}\t")


async def test_read_cuts_long_lines_and_keeps_only_newline_breaks(ctx):
    (ctx.workspace / "long.txt").write_text("y" * (MAX_LINE_CHARS + 10) + "\nweird\rline\r\n")
    out = await run(Read(), ctx, path="long.txt")
    first, second = out.content.splitlines()[0], out.content.split("\n")[1]
    assert first.endswith("[... 10 more characters]")
    assert second == "     2\tweird\rline"


async def test_read_errors(ctx):
    (ctx.workspace / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (ctx.workspace / "empty.txt").write_text("")
    with pytest.raises(ToolError, match=r"img.png is a binary file \(16 bytes\)"):
        await run(Read(), ctx, path="img.png")
    with pytest.raises(ToolError, match="is a folder"):
        await run(Read(), ctx, path=".")
    with pytest.raises(ToolError, match=r"offset 9 is past the end of the file \(4 lines\)"):
        await run(Read(), ctx, path="a.py", offset=9)
    assert (await run(Read(), ctx, path="empty.txt")).content == "(the file is empty)"


async def test_read_shows_the_editors_text_and_says_when_it_is_unsaved(ctx):
    path = ctx.workspace / "a.py"
    ctx.documents.open(path, "one\nTWO\n", 3)
    out = await run(Read(), ctx, path="a.py")
    assert out.content == ("The editor has unsaved changes to a.py; this is the editor's text, "
                           "not the file on disk.\n     1\tone\n     2\tTWO")
    ctx.documents.change(path, path.read_text(), 4)  # saved: no note
    assert (await run(Read(), ctx, path="a.py")).content.startswith("     1\t")


# --- Edit -----------------------------------------------------------------------------------

async def test_edit_keeps_crlf_line_endings(ctx):
    path = ctx.workspace / "win.txt"
    path.write_bytes(b"alpha\r\nbeta\r\ngamma\r\n")
    out = await run(Edit(), ctx, path="win.txt", old_string="alpha\nbeta", new_string="a\nb")
    assert path.read_bytes() == b"a\r\nb\r\ngamma\r\n"
    assert out.summary == "1 replacement"


async def test_edit_refuses_unsaved_buffers_and_non_text(ctx):
    path = ctx.workspace / "a.py"
    ctx.documents.open(path, "one\ntwo\nthree\ntwo\n# typing...\n", 1)
    with pytest.raises(ToolError, match="a.py has unsaved changes in the editor"):
        await run(Edit(), ctx, path="a.py", old_string="one", new_string="1")
    with pytest.raises(ToolError, match="unsaved changes"):
        await Edit().preview(norm(Edit(), ctx, path="a.py", old_string="one", new_string="1"), ctx)
    ctx.documents.change(path, path.read_text(), 2)  # the user saved: buffer equals disk
    await run(Edit(), ctx, path="a.py", old_string="one", new_string="1")
    assert path.read_text().startswith("1\n")
    (ctx.workspace / "latin1.txt").write_bytes(b"caf\xe9\n")
    with pytest.raises(ToolError, match="not a UTF-8 text file"):
        await run(Edit(), ctx, path="latin1.txt", old_string="caf", new_string="cafe")
    ctx.documents.close(path)
    with pytest.raises(ToolError, match="the same"):
        await run(Edit(), ctx, path="a.py", old_string="two", new_string="two")


# --- Write ----------------------------------------------------------------------------------

async def test_write_creates_overwrites_and_reports(ctx):
    created = await run(Write(), ctx, path="pkg/new.py", content="x = 1\n")
    assert created.summary == "created 1 line"
    assert (ctx.workspace / "pkg/new.py").read_text() == "x = 1\n"
    assert created.diff.startswith("--- a/pkg/new.py\n+++ b/pkg/new.py")
    inp = norm(Write(), ctx, path="a.py", content="only\n")
    with pytest.raises(ToolError, match=r"^a.py already exists and you have not read it"):
        await Write().preview(inp, ctx)
    await run(Read(), ctx, path="a.py", limit=1)  # a part read counts
    preview = await Write().preview(inp, ctx)
    assert "-three\n" in preview.diff and "+only\n" in preview.diff
    assert (ctx.workspace / "a.py").read_text().startswith("one")  # preview changes nothing
    wrote = await Write().run(inp, ctx)
    assert wrote.summary == "wrote 1 line" and (ctx.workspace / "a.py").read_text() == "only\n"
    same = await run(Write(), ctx, path="a.py", content="only\n")
    assert same.summary == "unchanged" and same.diff is None


async def test_new_files_get_the_mode_the_umask_gives(ctx):
    old = os.umask(0o022)
    try:
        await run(Write(), ctx, path="made.py", content="x = 1\n")
        await run(MultiEdit(), ctx, path="multi.py", edits=[{"old_string": "", "new_string": "y"}])
        await run(Edit(), ctx, path="edited.py", old_string="", new_string="z")
    finally:
        os.umask(old)
    for name in ("made.py", "multi.py", "edited.py"):
        assert stat.S_IMODE(os.stat(ctx.workspace / name).st_mode) == 0o644, name


@pytest.mark.timeout(10)
async def test_pipes_and_devices_are_refused_never_waited_on(ctx):
    os.mkfifo(ctx.workspace / "pipe")  # opening it for reading would wait for a writer
    (ctx.workspace / "zero").symlink_to("/dev/zero")
    with pytest.raises(ToolError, match="is a named pipe, not a file"):
        await run(Read(), ctx, path="pipe")
    with pytest.raises(ToolError, match="is a named pipe, not a file"):
        await run(Edit(), ctx, path="pipe", old_string="a", new_string="b")
    with pytest.raises(ToolError, match="is outside the workspace"):  # the link leads out
        await run(Read(), ctx, path="zero")


async def test_write_errors(ctx):
    with pytest.raises(ToolError, match="is a folder"):
        await run(Write(), ctx, path=".", content="x")
    ctx.documents.open(ctx.workspace / "draft.md", "not saved yet", 1)  # new, unsaved buffer
    with pytest.raises(ToolError, match="draft.md has unsaved changes"):
        await run(Write(), ctx, path="draft.md", content="mine")
    assert not (ctx.workspace / "draft.md").exists()
    with pytest.raises(msgspec.ValidationError, match=r"missing required field `content`"):
        msgspec.convert({"path": "x"}, Write.input_type)


# --- MultiEdit ------------------------------------------------------------------------------

async def test_multiedit_applies_in_order(ctx):
    out = await run(MultiEdit(), ctx, path="a.py", edits=[
        {"old_string": "one", "new_string": "uno"},
        {"old_string": "uno\ntwo", "new_string": "uno\ndos"},
        {"old_string": "two", "new_string": "2", "replace_all": True}])
    assert (ctx.workspace / "a.py").read_text() == "uno\ndos\nthree\n2\n"
    assert out.summary == "3 replacements"
    assert "-one\n-two\n+uno\n+dos\n" in out.diff


async def test_multiedit_refuses_unsaved_buffers(ctx):
    path = ctx.workspace / "a.py"
    ctx.documents.open(path, "one\ntwo\nthree\ntwo\n# typing...\n", 1)
    edits = [{"old_string": "one", "new_string": "1"}, {"old_string": "three", "new_string": "3"}]
    with pytest.raises(ToolError, match="a.py has unsaved changes in the editor"):
        await run(MultiEdit(), ctx, path="a.py", edits=edits)
    with pytest.raises(ToolError, match="unsaved changes"):
        await MultiEdit().preview(norm(MultiEdit(), ctx, path="a.py", edits=edits), ctx)
    assert path.read_text() == "one\ntwo\nthree\ntwo\n"
    ctx.documents.open(ctx.workspace / "new.md", "a draft", 1)  # a new buffer, never saved
    with pytest.raises(ToolError, match="new.md has unsaved changes"):
        await run(MultiEdit(), ctx, path="new.md",
                  edits=[{"old_string": "", "new_string": "mine"}])
    assert not (ctx.workspace / "new.md").exists()
    ctx.documents.change(path, path.read_text(), 2)  # the user saved: buffer equals disk
    await run(MultiEdit(), ctx, path="a.py", edits=edits)
    assert path.read_text() == "1\ntwo\n3\ntwo\n"


async def test_multiedit_is_all_or_nothing(ctx):
    before = (ctx.workspace / "a.py").read_text()
    with pytest.raises(ToolError, match=r"^edits\[1\]: old_string occurs 2 times .*Nothing was "
                                        r"changed"):
        await run(MultiEdit(), ctx, path="a.py", edits=[
            {"old_string": "one", "new_string": "1"}, {"old_string": "two", "new_string": "2"}])
    with pytest.raises(ToolError, match=r"^edits\[2\]: old_string was not found"):
        await run(MultiEdit(), ctx, path="a.py", edits=[
            {"old_string": "one", "new_string": "1"}, {"old_string": "three", "new_string": "3"},
            {"old_string": "one", "new_string": "again"}])
    assert (ctx.workspace / "a.py").read_text() == before


async def test_multiedit_creates_a_file_and_checks_its_input(ctx):
    out = await run(MultiEdit(), ctx, path="n.txt", edits=[
        {"old_string": "", "new_string": "a b\n"}, {"old_string": "b", "new_string": "c"}])
    assert out.summary == "created" and (ctx.workspace / "n.txt").read_text() == "a c\n"
    with pytest.raises(ToolError, match="does not exist"):
        await run(MultiEdit(), ctx, path="m.txt", edits=[{"old_string": "x", "new_string": "y"}])
    with pytest.raises(ToolError, match=r"edits\[1\]: old_string is empty"):
        await run(MultiEdit(), ctx, path="a.py", edits=[
            {"old_string": "one", "new_string": "1"}, {"old_string": "", "new_string": "2"}])
    with pytest.raises(msgspec.ValidationError, match=r"at `\$.edits`"):
        msgspec.convert({"path": "a.py", "edits": []}, MultiEdit.input_type)
    with pytest.raises(msgspec.ValidationError, match=r"`\$.edits\[0\]`"):
        msgspec.convert({"path": "a.py", "edits": [{"old": "x"}]}, MultiEdit.input_type)
