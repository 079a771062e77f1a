"""Finding files: Glob (ripgrep's file walk, so .gitignore is honoured) and LS (one folder)."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, ClassVar

import anyio
import msgspec

from heddle.core.tools import ToolContext, ToolError, ToolOutput
from heddle.tools.base import FILE_PATH, ToolBase
from heddle.tools.globs import compile_glob
from heddle.tools.search import LIST_FILES, run_ripgrep, with_unreadable
from heddle.words import plural

MAX_FILES = 1000
MAX_ENTRIES = 1000


class GlobInput(msgspec.Struct):
    aliases: ClassVar[dict[str, str]] = FILE_PATH
    pattern: Annotated[str, msgspec.Meta(min_length=1, description="Glob relative to path: *.py (that folder only), **/*.py (any depth), src/**/test_*.{js,ts}")]
    path: Annotated[str, msgspec.Meta(description="Folder to search; default the workspace")] = "."


class Glob(ToolBase):
    name: ClassVar[str] = "Glob"
    description: ClassVar[str] = (
        "Find files whose path matches a glob pattern (`**` spans folders). Files that "
        ".gitignore or .ignore exclude and the .git folder are skipped, even when the pattern "
        "matches them; hidden files are included. Returns paths relative to the workspace, "
        f"most recently modified first, at most {MAX_FILES}.")
    input_type = GlobInput
    concurrency_safe = True
    read_only = True
    max_result_chars = 60_000

    def title(self, inp: GlobInput, ctx: ToolContext) -> str:
        where = ctx.relative(Path(inp.path))
        return f"Find {inp.pattern}" + (f" in {where}" if where != "." else "")

    async def run(self, inp: GlobInput, ctx: ToolContext) -> ToolOutput:
        root = Path(inp.path)
        if not root.is_dir():
            raise ToolError(f"{inp.path} is not a folder" if root.exists()
                            else f"{inp.path} does not exist")
        pattern = inp.pattern
        if pattern.startswith(f"{root}/"):
            pattern = pattern[len(str(root)):]
        matches = compile_glob(pattern.lstrip("/").removeprefix("./")).fullmatch
        # ripgrep lists the files its ignore rules keep, and the pattern picks among them here:
        # as a --glob it would let ripgrep into ignored folders that it matches (see globs)
        out, unreadable = await run_ripgrep(LIST_FILES, root)
        names = out.decode(errors="replace").split("\0")
        files = await anyio.to_thread.run_sync(_newest_first, root, names, matches)
        if not files:
            found = ToolOutput("No files found.", "no files")
        else:
            shown = [ctx.relative(f) for f in files[:MAX_FILES]]
            if len(files) > MAX_FILES:
                shown.append(f"(and {len(files) - MAX_FILES} more; narrow the pattern or the "
                             "path)")
            found = ToolOutput("\n".join(shown), plural(len(files), "file"))
        return with_unreadable(found, unreadable, "")


def _newest_first(root: Path, names: list[str], matches: Callable[[str], object]) -> list[Path]:
    """The names that match, as paths under `root`, most recently modified first."""
    def mtime(p: Path) -> float:
        try:
            return p.stat().st_mtime
        except OSError:
            return 0.0
    paths = [root / n for n in names if n and matches(n)]
    return sorted(paths, key=lambda p: (-mtime(p), str(p)))


class LSInput(msgspec.Struct):
    aliases: ClassVar[dict[str, str]] = FILE_PATH
    path: Annotated[str, msgspec.Meta(description="Folder to list; default the workspace")] = "."
    ignore: Annotated[list[str], msgspec.Meta(description="Glob patterns of names to leave out, e.g. *.pyc")] = []


class LS(ToolBase):
    name: ClassVar[str] = "LS"
    description: ClassVar[str] = (
        "List one folder: sub-folders end with `/`, symlinks show their target (and say when "
        "it is missing or a loop: broken link), files show their size. The .git folder is left "
        "out. Use Glob to find files at any depth.")
    input_type = LSInput
    concurrency_safe = True
    read_only = True
    max_result_chars = 60_000
    title_template = "List {path}"

    async def run(self, inp: LSInput, ctx: ToolContext) -> ToolOutput:
        return await anyio.to_thread.run_sync(self._list, inp)

    def _list(self, inp: LSInput) -> ToolOutput:
        try:
            with os.scandir(inp.path) as it:
                entries = sorted((e for e in it if e.name != ".git"
                                  and not any(fnmatch.fnmatch(e.name, g) for g in inp.ignore)),
                                 key=lambda e: (not _is_dir(e), e.name))
        except FileNotFoundError:
            raise ToolError(f"{inp.path} does not exist") from None
        except NotADirectoryError:
            raise ToolError(f"{inp.path} is a file, not a folder; use Read") from None
        except OSError as exc:
            raise ToolError(f"cannot list {inp.path}: {exc.strerror}") from None
        if not entries:
            return ToolOutput("(the folder is empty)", "empty")
        lines = [_describe(e) for e in entries[:MAX_ENTRIES]]
        if len(entries) > MAX_ENTRIES:
            lines.append(f"(and {len(entries) - MAX_ENTRIES} more)")
        return ToolOutput("\n".join(lines), plural(len(entries), "entry", "entries"))


def _is_dir(entry: os.DirEntry) -> bool:
    """A folder, or a link to one; False for a link in a loop (stat fails with ELOOP, which
    `is_dir` raises: it only treats a missing target as "not a folder")."""
    try:
        return entry.is_dir()
    except OSError:
        return False


def _describe(entry: os.DirEntry) -> str:
    if entry.is_symlink():
        try:
            target = os.readlink(entry.path)
        except OSError:
            target = "?"
        # exists() follows the link: False for a missing target and for a loop
        broken = "" if os.path.exists(entry.path) else "  (broken link)"
        return f"{entry.name} -> {target}{broken}"
    if entry.is_dir():
        return entry.name + "/"
    try:
        size = entry.stat().st_size
    except OSError:
        return entry.name
    return f"{entry.name}  ({_size(size)})"


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"
