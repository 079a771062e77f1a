"""Grep's results come in path order, and its glob cannot bring ignored files back."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from heddle.core.tools import ToolContext
from heddle.tools.listing import Glob
from heddle.tools.search import Grep


async def run(tool, ctx, **raw):
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
