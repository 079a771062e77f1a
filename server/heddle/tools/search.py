"""Grep: ripgrep over the workspace."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Annotated, ClassVar, Literal

import anyio
import msgspec

from heddle.tools.base import ToolContext, ToolError, ToolOutput


def ripgrep() -> str:
    """The `rg` installed beside this Python (the ripgrep wheel), else one on PATH."""
    here = str(Path(sys.executable).parent)
    found = shutil.which("rg", path=here + os.pathsep + os.environ.get("PATH", ""))
    if found is None:
        raise ToolError("ripgrep (rg) is not installed; install the `ripgrep` package")
    return found


class GrepInput(msgspec.Struct, forbid_unknown_fields=True):
    pattern: Annotated[str, msgspec.Meta(min_length=1, description="Regular expression (Rust regex syntax)")]
    path: Annotated[str, msgspec.Meta(description="File or folder to search; default the workspace")] = "."
    glob: Annotated[str | None, msgspec.Meta(description="Only files matching this glob, e.g. *.py")] = None
    output_mode: Literal["content", "files_with_matches", "count"] = "content"
    case_insensitive: bool = False
    context: Annotated[int, msgspec.Meta(ge=0, le=20, description="Lines of context around matches")] = 0


class Grep:
    name: ClassVar[str] = "Grep"
    description: ClassVar[str] = (
        "Search file contents with a regular expression (ripgrep: Rust regex syntax; files "
        "ignored by .gitignore and the .git folder are skipped, hidden files are searched). "
        "output_mode: content (matching lines as path:line:text), files_with_matches, or "
        "count. Narrow with glob (e.g. *.py) and path; context adds lines around matches.")
    input_type = GrepInput
    concurrency_safe = True
    read_only = True
    max_result_chars = 30_000

    def normalise(self, inp: GrepInput, ctx: ToolContext) -> GrepInput:
        return msgspec.structs.replace(inp, path=str(ctx.resolve(inp.path, self.name)))

    def title(self, inp: GrepInput, ctx: ToolContext) -> str:
        return f"Search \"{inp.pattern}\" in {ctx.relative(Path(inp.path)) or '.'}"

    def rule_for(self, inp: GrepInput, ctx: ToolContext) -> str:
        return "Grep"

    async def preview(self, inp, ctx):
        return None

    async def run(self, inp: GrepInput, ctx: ToolContext) -> ToolOutput:
        args = [ripgrep(), "--color", "never", "--no-heading", "--no-messages", "--hidden",
                "--no-require-git", "--glob", "!.git"]
        if inp.output_mode == "files_with_matches":
            args.append("--files-with-matches")
        elif inp.output_mode == "count":
            args.append("--count")
        else:
            args.append("--line-number")
            if inp.context:
                args += ["--context", str(inp.context)]
        if inp.case_insensitive:
            args.append("--ignore-case")
        if inp.glob:
            args += ["--glob", inp.glob]
        args += ["--regexp", inp.pattern, "--", inp.path]
        result = await anyio.run_process(args, cwd=str(ctx.workspace), check=False,
                                         stdin=subprocess.DEVNULL)
        if result.returncode == 1:
            return ToolOutput("No matches.", "no matches")
        if result.returncode != 0:
            raise ToolError(result.stderr.decode(errors="replace").strip()
                            or f"rg failed with exit code {result.returncode}")
        root = str(ctx.workspace.resolve()) + os.sep
        text = result.stdout.decode(errors="replace").replace(root, "")
        lines = text.count("\n")
        unit = "files" if inp.output_mode != "content" else "lines"
        # over-long output is cut by the executor, which keeps the full text on disk
        return ToolOutput(text.rstrip("\n"), f"{lines} {unit}")
