"""Grep's results come in path order, its glob cannot bring ignored files back, and a path it
cannot read loses nothing else."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import pytest

from heddle.core.tools import ToolContext, ToolError
from heddle.tools.listing import Glob
from heddle.tools.inputs import accept
from heddle.tools.search import NOTE_CHARS, NOTED, Grep


async def run(tool, ctx, **raw):
    raw, _ = accept(tool, raw)  # as the executor takes it: `context` is -C
    return await tool.run(tool.normalise(msgspec.convert(raw, tool.input_type), ctx), ctx)


def filler(d: int, f: int) -> int:
    return (d * 37 + f * 11) % 50 * 40


@pytest.fixture
def many(tmp_path: Path) -> ToolContext:
    """240 files in 12 folders, each with two matches, of sizes that differ, so that ripgrep's
    threads finish them in an order of their own."""
    ws = tmp_path.resolve()
    for d in range(12):
        (ws / f"d{d:02}").mkdir()
        for f in range(20):
            (ws / f"d{d:02}" / f"f{f:02}.txt").write_text(
                f"needle {d} {f}\n" + "filler line\n" * filler(d, f) + "other\nneedle again\n")
    return ToolContext(ws)


async def test_grep_lists_files_in_path_order_every_time(many):
    names = [(d, f, f"d{d:02}/f{f:02}.txt") for d in range(12) for f in range(20)]
    found = await run(Grep(), many, pattern="needle")
    assert found.content.splitlines() == [
        line for d, f, name in names
        for line in (f"{name}:1:needle {d} {f}", f"{name}:{filler(d, f) + 3}:needle again")]
    assert found.summary == "480 lines"
    files = await run(Grep(), many, pattern="needle", output_mode="files_with_matches")
    assert files.content.splitlines() == [name for _, _, name in names]
    counted = await run(Grep(), many, pattern="needle", output_mode="count")
    assert counted.content.splitlines() == [f"{name}:2" for _, _, name in names]
    for _ in range(3):
        assert (await run(Grep(), many, pattern="needle")).content == found.content


async def test_grep_context_groups_stay_apart_in_path_order(many):
    around = await run(Grep(), many, pattern="needle again|other", context=1,
                       path="d00")
    blocks = around.content.split("\n--\n")
    assert len(blocks) == 20
    assert blocks[0].splitlines() == ["d00/f00.txt-1-needle 0 0", "d00/f00.txt:2:other",
                                      "d00/f00.txt:3:needle again"]
    assert [b.split("-")[0] for b in blocks] == [f"d00/f{f:02}.txt" for f in range(20)]


def too_long_to_open(ws: Path, top: str = "d") -> str:
    """Folders nested past PATH_MAX with a matching file at the bottom: ripgrep cannot open
    it (ENAMETOOLONG), whoever runs the test (a permission would not stop root). Made through
    folder descriptors, since no path reaches there."""
    fd = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for level in range(20):
            name = (top if level == 0 else "d") * 250
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        out = os.open("deep.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(out, b"needle deep down\n")
        os.close(out)
    finally:
        os.close(fd)
    return top * 250


async def test_what_ripgrep_found_stays_when_it_could_not_read_a_path(tmp_path):
    """ripgrep exits 2 when a path cannot be read, and prints what it found elsewhere: the
    matches stand, and a short note says what was not read."""
    ws = tmp_path.resolve()
    (ws / "a.txt").write_text("a needle here\n")
    top = too_long_to_open(ws)
    ctx = ToolContext(ws)
    found = await run(Grep(), ctx, pattern="needle")
    text, note = found.content.split("\n\n")
    assert text == "a.txt:1:a needle here" and found.summary == "1 line, 1 unreadable"
    assert note.startswith("1 path could not be read, so what they hold is missing here:\n"
                           + top[:10])
    assert "File name too long (os error 36)" in note and len(note) < 500
    globbed = await run(Grep(), ctx, pattern="needle", glob="*.txt")
    assert globbed.content.split("\n\n")[0] == "a.txt:1:a needle here"
    nothing = await run(Grep(), ctx, pattern="nowhere")
    assert nothing.content.startswith("No matches.\n\n1 path could not be read")
    listed = await run(Glob(), ctx, pattern="*.txt")
    assert listed.content.split("\n\n")[0] == "a.txt" and listed.summary.endswith("1 unreadable")
    with pytest.raises(ToolError, match="regex parse error"):  # a failure is still one
        await run(Grep(), ctx, pattern="(")


async def test_the_note_of_unreadable_paths_is_bounded(tmp_path):
    ws = tmp_path.resolve()
    (ws / "a.txt").write_text("a needle here\n")
    for top in "abcdefg":
        too_long_to_open(ws, top)
    found = await run(Grep(), ToolContext(ws), pattern="needle")
    note = found.content.split("\n\n")[1].splitlines()
    assert note[0].startswith("7 paths could not be read") and note[-1] == "(and 2 more)"
    assert len(note) == 1 + NOTED + 1 and all(len(line) <= NOTE_CHARS + 1 for line in note[1:])
