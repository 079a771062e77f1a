"""Glob, LS and Grep: happy paths, .gitignore, errors."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import pytest

from heddle.core.tools import ToolContext, ToolError
from heddle.tools.listing import LS, Glob
from heddle.tools.inputs import accept
from heddle.tools.search import Grep


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    ws = tmp_path.resolve()
    for name, text in {"src/app.py": "def main():\n    return helper()\n",
                       "src/util/helper.py": "def helper():\n    return 42\n",
                       "src/util/notes.md": "helper notes\n", "README.md": "# demo\n",
                       ".github/ci.yml": "on: push\n", "build/out.py": "def helper(): pass\n",
                       ".git/config": "[core]\n", ".gitignore": "build/\n"}.items():
        (ws / name).parent.mkdir(parents=True, exist_ok=True)
        (ws / name).write_text(text)
    os.utime(ws / "src/app.py", (1_000_000_000, 1_000_000_000))  # the oldest file
    return ToolContext(ws)


async def run(tool, ctx, **raw):
    raw, _ = accept(tool, raw)  # as the executor takes it: `context` is -C
    return await tool.run(tool.normalise(msgspec.convert(raw, tool.input_type), ctx), ctx)


async def test_glob_honours_gitignore_includes_hidden_newest_first(ctx):
    out = await run(Glob(), ctx, pattern="**/*.py")
    assert out.content.splitlines() == ["src/util/helper.py", "src/app.py"]
    assert out.summary == "2 files"
    hidden = await run(Glob(), ctx, pattern="**/*.yml")
    assert hidden.content == ".github/ci.yml"
    assert (await run(Glob(), ctx, pattern="config")).content == "No files found."


async def test_glob_pattern_is_relative_to_path(ctx):
    out = await run(Glob(), ctx, pattern="util/*.{py,md}", path="src")
    assert sorted(out.content.splitlines()) == ["src/util/helper.py", "src/util/notes.md"]
    absolute = await run(Glob(), ctx, pattern=f"{ctx.workspace}/src/*.py", path="src")
    assert absolute.content == "src/app.py"
    top = await run(Glob(), ctx, pattern="*.md")
    assert top.content == "README.md"  # like a shell: no slash, this folder only
    with pytest.raises(ToolError, match="is not a folder"):
        await run(Glob(), ctx, pattern="*", path="README.md")
    with pytest.raises(ToolError, match="does not exist"):
        await run(Glob(), ctx, pattern="*", path="nope")


async def test_glob_never_lists_the_git_folder(ctx):
    everything = (await run(Glob(), ctx, pattern="**/*")).content.splitlines()
    assert not [f for f in everything if f.startswith(".git/")]
    assert {".gitignore", "README.md", "src/app.py"} <= set(everything)


@pytest.fixture
def ignoring(ctx: ToolContext) -> ToolContext:
    """The workspace with more files that .gitignore and .ignore exclude: in a folder (build/,
    deeper too), of a kind (*.log), in a folder that .ignore names (scratch/)."""
    ws = ctx.workspace
    (ws / ".gitignore").write_text("build/\n*.log\n")
    (ws / ".ignore").write_text("scratch/\n")
    for name in ("build/sub/deep.py", "src/debug.log", "scratch/try.py"):
        (ws / name).parent.mkdir(parents=True, exist_ok=True)
        (ws / name).write_text("helper()\n")
    return ctx


SRC = ["src/app.py", "src/util/helper.py", "src/util/notes.md"]


@pytest.mark.parametrize("pattern,found", [
    ("**/*", SRC + [".github/ci.yml", ".gitignore", ".ignore", "README.md"]),
    ("**", SRC + [".github/ci.yml", ".gitignore", ".ignore", "README.md"]),
    ("*/**", SRC + [".github/ci.yml"]),
    ("{src,build,scratch}/**/*", SRC),
])
async def test_glob_keeps_out_what_gitignore_and_ignore_exclude(ignoring, pattern, found):
    listed = await run(Glob(), ignoring, pattern=pattern)
    assert sorted(listed.content.splitlines()) == sorted(found)


@pytest.mark.parametrize("pattern", ["build/*", "build/**", "build/sub/*.py", "**/*.log",
                                     "src/*.log", "scratch/*", "**/deep.py"])
async def test_glob_finds_nothing_ignored_even_when_named(ignoring, pattern):
    assert (await run(Glob(), ignoring, pattern=pattern)).content == "No files found."


async def test_glob_and_grep_search_an_ignored_folder_given_as_path(ignoring):
    # the folder itself was asked for; the ignore rules still apply inside it
    found = await run(Glob(), ignoring, pattern="**/*.py", path="build")
    assert set(found.content.splitlines()) == {"build/out.py", "build/sub/deep.py"}
    grep = await run(Grep(), ignoring, pattern="helper", path="build", glob="*.py")
    assert grep.content.splitlines() == ["build/out.py:1:def helper(): pass",
                                         "build/sub/deep.py:1:helper()"]


@pytest.mark.parametrize("glob,found", [
    ("*", SRC), ("**/*", SRC), ("**", SRC), ("*.py", SRC[:2]), ("src/**", SRC),
    ("build/**", []), ("*.log", []), ("src/*.log", []), ("scratch/*", []),
    ("!*.md", SRC[:2]),
])
async def test_grep_glob_cannot_bring_ignored_files_back(ignoring, glob, found):
    out = await run(Grep(), ignoring, pattern="helper", glob=glob, output_mode="files_with_matches")
    assert out.content.splitlines() == (found or ["No matches."])


async def test_grep_glob_never_searches_the_git_folder(ignoring):
    assert (await run(Grep(), ignoring, pattern="core", glob="**/*")).content == "No matches."


async def test_ls_lists_one_folder(ctx):
    (ctx.workspace / "link").symlink_to("src/app.py")
    out = await run(LS(), ctx)
    assert out.content.splitlines() == [
        ".github/", "build/", "src/", ".gitignore  (7 B)", "README.md  (7 B)", "link -> src/app.py"]
    assert out.summary == "6 entries"
    ignored = await run(LS(), ctx, path="src/util", ignore=["*.md"])
    assert ignored.content == "helper.py  (28 B)"


async def test_ls_errors(ctx):
    (ctx.workspace / "empty").mkdir()
    assert (await run(LS(), ctx, path="empty")).content == "(the folder is empty)"
    with pytest.raises(ToolError, match="is a file, not a folder"):
        await run(LS(), ctx, path="README.md")
    with pytest.raises(ToolError, match="does not exist"):
        await run(LS(), ctx, path="nope")


@pytest.fixture
def loops(ctx: ToolContext) -> ToolContext:
    """The workspace with symlink loops (one link to itself, two to each other), a dangling
    link and a link to a folder at its root."""
    ws = ctx.workspace
    (ws / "self").symlink_to("self")
    (ws / "ping").symlink_to("pong")
    (ws / "pong").symlink_to("ping")
    (ws / "gone").symlink_to("missing.txt")
    (ws / "code").symlink_to("src")
    return ctx


async def test_ls_lists_symlink_loops_as_broken_links(loops):
    out = await run(LS(), loops)
    assert out.content.splitlines() == [
        ".github/", "build/", "code -> src", "src/", ".gitignore  (7 B)", "README.md  (7 B)",
        "gone -> missing.txt  (broken link)", "ping -> pong  (broken link)",
        "pong -> ping  (broken link)", "self -> self  (broken link)"]
    assert out.summary == "10 entries"


async def test_glob_and_grep_walk_past_symlink_loops(loops):
    files = await run(Glob(), loops, pattern="**/*.{py,md}")
    assert sorted(files.content.splitlines()) == [
        "README.md", "src/app.py", "src/util/helper.py", "src/util/notes.md"]
    found = await run(Grep(), loops, pattern="helper", output_mode="files_with_matches")
    assert found.content.splitlines() == ["src/app.py", "src/util/helper.py", "src/util/notes.md"]


@pytest.mark.parametrize("tool,raw", [(LS(), {}), (Glob(), {"pattern": "*"}),
                                      (Grep(), {"pattern": "x"})])
@pytest.mark.parametrize("path", ["self", "ping", "ping/inside"])
async def test_a_path_through_a_symlink_loop_is_a_clear_error(loops, tool, raw, path):
    with pytest.raises(ToolError, match=f"^{path} cannot be used: its symbolic links form a "
                                        "loop$"):
        await run(tool, loops, path=path, **raw)


async def test_grep_context_glob_count_and_case(ctx):
    found = await run(Grep(), ctx, pattern="helper\\(\\)", glob="*.py")
    assert found.content.splitlines() == ["src/app.py:2:    return helper()",
                                          "src/util/helper.py:1:def helper():"]
    around = await run(Grep(), ctx, pattern="return 42", context=1)
    assert around.content.splitlines() == ["src/util/helper.py-1-def helper():",
                                           "src/util/helper.py:2:    return 42"]
    counted = await run(Grep(), ctx, pattern="helper", output_mode="count", path="src/util")
    assert counted.content.splitlines() == ["src/util/helper.py:1", "src/util/notes.md:1"]
    loud = await run(Grep(), ctx, pattern="DEMO", case_insensitive=True)
    assert loud.content == "README.md:1:# demo"
    hidden = await run(Grep(), ctx, pattern="push", output_mode="files_with_matches")
    assert hidden.content == ".github/ci.yml"


async def test_grep_errors(ctx):
    with pytest.raises(ToolError, match="regex parse error"):
        await run(Grep(), ctx, pattern="(unclosed")
    with pytest.raises(ToolError, match="unclosed alternate group"):
        await run(Grep(), ctx, pattern="x", glob="*.{py")
    for raw in ({"pattern": "a\0b"}, {"pattern": "a", "glob": "*\0"}):
        with pytest.raises(ToolError, match=r"^pattern and glob cannot contain a NUL character"):
            await run(Grep(), ctx, **raw)
    with pytest.raises(msgspec.ValidationError, match=r"at `\$.output_mode`"):
        msgspec.convert({"pattern": "x", "output_mode": "lines"}, Grep.input_type)
    with pytest.raises(msgspec.ValidationError, match=r"at `\$.-C`"):
        msgspec.convert({"pattern": "x", "-C": 101}, Grep.input_type)
