"""Grep: ripgrep over the workspace, its results in path order.

ripgrep exits 2 when it could not read some path (a permission, a name too long) but still
prints what it found elsewhere: those results stand, with a short note of what was not read."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Annotated, ClassVar, Literal, NamedTuple

import anyio
import msgspec

from heddle.core.tools import ToolContext, ToolError, ToolOutput
from heddle.tools.base import FILE_PATH, ToolBase
from heddle.words import plural


def ripgrep() -> str:
    """The `rg` installed beside this Python (the ripgrep wheel), else one on PATH."""
    here = str(Path(sys.executable).parent)
    found = shutil.which("rg", path=here + os.pathsep + os.environ.get("PATH", ""))
    if found is None:
        raise ToolError("ripgrep (rg) is not installed; install the `ripgrep` package")
    return found


MAX_CONTEXT = 100

Context = Annotated[int, msgspec.Meta(ge=0, le=MAX_CONTEXT)]


class GrepInput(msgspec.Struct):
    aliases: ClassVar[dict[str, str]] = {**FILE_PATH, "context": "-C",
                                         "case_insensitive": "-i"}
    pattern: Annotated[str, msgspec.Meta(min_length=1, description="Regular expression (Rust regex syntax)")]
    path: Annotated[str, msgspec.Meta(description="File or folder to search; default the workspace")] = "."
    glob: Annotated[str | None, msgspec.Meta(description="Only files matching this glob: *.py or *.{ts,tsx} (file names, any depth), src/**/*.py (paths relative to the workspace)")] = None
    type: Annotated[str | None, msgspec.Meta(description="Only files of this ripgrep type (rg --type): py, js, ts, rust, go, java, ...")] = None
    output_mode: Annotated[Literal["content", "files_with_matches", "count"], msgspec.Meta(description="content: matching lines as path:line:text (default); files_with_matches: paths only; count: path:matches")] = "content"
    ignore_case: Annotated[bool, msgspec.Meta(description="Case-insensitive (rg -i)")] = msgspec.field(name="-i", default=False)
    after: Annotated[Context, msgspec.Meta(description=f"Lines to show after each match, content mode (rg -A), 0-{MAX_CONTEXT}")] = msgspec.field(name="-A", default=0)
    before: Annotated[Context, msgspec.Meta(description=f"Lines to show before each match, content mode (rg -B), 0-{MAX_CONTEXT}")] = msgspec.field(name="-B", default=0)
    around: Annotated[Context, msgspec.Meta(description=f"Lines to show before and after each match, content mode (rg -C); -A and -B override it on their side")] = msgspec.field(name="-C", default=0)
    numbers: Annotated[bool, msgspec.Meta(description="Line numbers in content mode (rg -n); default true")] = msgspec.field(name="-n", default=True)
    multiline: Annotated[bool, msgspec.Meta(description="Let the pattern span lines, with . matching newlines too (rg -U --multiline-dotall); every line of a match is shown")] = False
    head_limit: Annotated[Annotated[int, msgspec.Meta(ge=1)] | None, msgspec.Meta(description="Show at most this many lines of the result (content: lines, files_with_matches: files, count: files), like | head -N; default all (long results are cut in the middle)")] = None
    offset: Annotated[int, msgspec.Meta(ge=0, description="Skip this many lines of the result first (with head_limit: pages through it)")] = 0


class Grep(ToolBase):
    name: ClassVar[str] = "Grep"
    description: ClassVar[str] = (
        "Search file contents with a regular expression (ripgrep: Rust regex syntax). Files "
        "that .gitignore or .ignore exclude and the .git folder are skipped, even when glob "
        "matches them; hidden files are searched. output_mode: content (matching lines as "
        "path:line:text), files_with_matches, or count; files come in path order. Narrow with "
        "path, glob (e.g. *.py) or type (e.g. py); -A/-B/-C add context lines, -i ignores "
        "case, multiline lets a match span lines; head_limit and offset page through a long "
        "result.")
    input_type = GrepInput
    concurrency_safe = True
    read_only = True
    max_result_chars = 30_000
    title_template = 'Search "{pattern}" in {path}'

    async def run(self, inp: GrepInput, ctx: ToolContext) -> ToolOutput:
        if "\0" in inp.pattern or "\0" in (inp.glob or ""):  # no process takes one in an argument
            raise ToolError("pattern and glob cannot contain a NUL character (Grep searches "
                            "text files, and skips files with one)")
        out, unreadable = await run_ripgrep(_command(inp), ctx.workspace)
        kept = None
        if inp.glob and out:
            # A --glob that matches a folder (`**/*` matches `build`) or an ignored file lets
            # ripgrep into it, whatever .gitignore says: the files that ripgrep lists by its
            # ignore rules alone are the ones whose results stay.
            listed = await run_ripgrep(LIST_FILES + ["--", inp.path], ctx.workspace)
            kept = set(listed.out.decode(errors="replace").split("\0"))
        root = str(ctx.workspace.resolve()) + os.sep
        # a big result takes a while to sort: not on the event loop
        found = await anyio.to_thread.run_sync(_result, inp, out, root, kept)
        return with_unreadable(found, unreadable, root)


# How Grep and Glob walk: hidden files included, .gitignore honoured outside git repositories
# too, the .git folder left out. Paths that cannot be read are passed over, and noted.
SKIPPED = ["--hidden", "--no-require-git", "--glob", "!.git"]
LIST_FILES = ["--files", "--null"] + SKIPPED
"""The files that ripgrep's ignore rules keep, each path ended by a NUL."""

NOTED = 5
"""Unreadable paths named in a result; the rest are counted."""
NOTE_CHARS = 300
"""Each of them at most this long (a name too long to open is thousands of characters)."""
_IO_ERROR = re.compile(r"^rg: (.+\(os error \d+\))$", re.MULTILINE)


class Ripgrep(NamedTuple):
    out: bytes
    unreadable: list[str]
    """ripgrep's messages about the paths it could not read (`PATH: why (os error N)`)."""


async def run_ripgrep(args: list[str], cwd: Path) -> Ripgrep:
    """ripgrep's output, and what it could not read; a ToolError with its message if it
    failed outright (a bad regex or glob)."""
    result = await anyio.run_process([ripgrep()] + args, cwd=str(cwd), check=False,
                                     stdin=subprocess.DEVNULL)
    if result.returncode in (0, 1):  # 1: nothing found; stderr has only warnings then
        return Ripgrep(result.stdout, [])
    err = result.stderr.decode(errors="replace")
    unreadable = _IO_ERROR.findall(err) if result.returncode == 2 else []
    if not unreadable:
        raise ToolError(err.strip() or f"rg failed with exit code {result.returncode}")
    return Ripgrep(result.stdout, unreadable)


def with_unreadable(found: ToolOutput, unreadable: list[str], root: str) -> ToolOutput:
    """`found`, and a note of the paths that could not be read (the first few, each cut)."""
    if not unreadable:
        return found
    shown = [_cut(u.removeprefix(root).removeprefix("./")) for u in unreadable[:NOTED]]
    more = len(unreadable) - len(shown)
    paths = "path" if len(unreadable) == 1 else "paths"
    note = (f"{len(unreadable)} {paths} could not be read, so what they hold is missing "
            "here:\n" + "\n".join(shown) + (f"\n(and {more} more)" if more else ""))
    return ToolOutput(f"{found.content}\n\n{note}",
                      f"{found.summary}, {len(unreadable)} unreadable")


def _cut(line: str) -> str:
    if len(line) <= NOTE_CHARS:
        return line
    half = NOTE_CHARS // 2
    return f"{line[:half]}…{line[-half:]}"


def _command(inp: GrepInput) -> list[str]:
    # --null ends each path with a NUL, so that it can be told from the text whatever either
    # holds; _by_file turns the lines back into the usual `path:12:text`
    args = ["--color", "never", "--no-heading", "--with-filename", "--null"] + SKIPPED
    if inp.output_mode == "files_with_matches":
        args.append("--files-with-matches")
    elif inp.output_mode == "count":
        args.append("--count")
    else:
        args.append("--line-number")  # always: it tells context lines apart; -n false drops it
        for flag, lines in (("--context", inp.around), ("--after-context", inp.after),
                            ("--before-context", inp.before)):
            if lines:
                args += [flag, str(lines)]
    if inp.ignore_case:
        args.append("--ignore-case")
    if inp.multiline:
        args += ["--multiline", "--multiline-dotall"]
    if inp.type:
        args += ["--type", inp.type]
    if inp.glob:
        args += ["--glob", inp.glob]
    return args + ["--regexp", inp.pattern, "--", inp.path]


def _result(inp: GrepInput, out: bytes, root: str, kept: set[str] | None) -> ToolOutput:
    content = inp.output_mode == "content"
    found = _by_file(out.decode(errors="replace"), root, inp.output_mode == "files_with_matches",
                     kept, numbers=inp.numbers or not content)
    if not found:
        return ToolOutput("No matches.", "no matches")
    # ripgrep searches files in parallel and prints each one as it is done: in path order,
    # the same search gives the same result
    blocks = [_strip_separators(found[path]) for path in sorted(found)]
    separated = content and (inp.around or inp.after or inp.before)
    lines = [line for i, b in enumerate(blocks) for line in (["--"] if separated and i else []) + b]
    if content:
        summary = plural(sum(len(b) - b.count('--') for b in blocks), "line")
    else:
        summary = plural(len(blocks), "file")
    if inp.offset or inp.head_limit is not None:
        return _page(inp, lines, summary)
    # over-long output is cut by the executor, which keeps the full text on disk
    return ToolOutput("\n".join(lines), summary)


def _page(inp: GrepInput, lines: list[str], summary: str) -> ToolOutput:
    """The lines from `offset`, at most `head_limit` of them, and where the next page starts."""
    end = len(lines) if inp.head_limit is None else min(len(lines), inp.offset + inp.head_limit)
    shown = lines[inp.offset:end]
    if not shown:
        raise ToolError(f"offset {inp.offset} is past the end of the result ({len(lines)} "
                        "lines)")
    note = (f"(lines {inp.offset + 1}-{end} of {len(lines)}"
            + (f"; read on with offset={end})" if end < len(lines) else ")"))
    return ToolOutput("\n".join(shown) + f"\n\n{note}", f"{summary}, {len(shown)} shown")


_CONTEXT_LINE = re.compile(r"\d+-")
_NUMBER = re.compile(r"^\d+[:-]")


def _by_file(out: str, root: str, names_only: bool, kept: set[str] | None,
             numbers: bool = True) -> dict[str, list[str]]:
    """ripgrep's `--null` output as path (relative to `root` when inside it) → its lines, in
    ripgrep's order: `path:12:text`, `path-11-text` (context), `--` between groups of lines,
    `path:3` (count), or `path` alone (files_with_matches). Only the paths in `kept`, if given;
    without `numbers`, the line numbers are left out (`path:text`, `path-text`)."""
    if names_only:
        return {p.removeprefix(root): [p.removeprefix(root)] for p in out.split("\0")
                if p and (kept is None or p in kept)}
    found: dict[str, list[str]] = {}
    lines: list[str] | None = None
    for line in out.split("\n"):
        path, nul, rest = line.partition("\0")
        if nul and kept is not None and path not in kept:
            lines = None
        elif nul:
            path = path.removeprefix(root)
            lines = found.setdefault(path, [])
            context = _CONTEXT_LINE.match(rest)
            if not numbers:
                rest = _NUMBER.sub("", rest, count=1)
            lines.append(path + ("-" if context else ":") + rest)
        elif line == "--":
            if lines is not None:
                lines.append(line)
        elif line:  # a note that starts with the path: `x.bin: binary file matches (...)`
            line = line.removeprefix(root)
            found.setdefault(line, []).append(line)
    return found


def _strip_separators(lines: list[str]) -> list[str]:
    """A file's lines without the `--` that ripgrep printed between it and the next file."""
    end = len(lines)
    while end and lines[end - 1] == "--":
        end -= 1
    return lines[:end]
