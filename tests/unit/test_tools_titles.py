"""What every built-in tool shows the user and offers to save for a call: its title, the rule
"allow always" would save, what normalising does to its input, and its preview kind."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from heddle.core.events import CommandPreview, DiffPreview
from heddle.core.tools import ToolContext, ToolError
from heddle.tools.registry import builtin_tools

TOOLS = builtin_tools()
TODOS = [{"content": "Run the tests", "status": "pending"},
         {"content": "Fix them", "status": "in_progress"}]
EDITS = [{"old_string": "one", "new_string": "1"}, {"old_string": "two", "new_string": "2"}]

# tool, raw input, title, rule
CALLS = [
    ("Read", {"path": "src/a.py"}, "Read src/a.py", "Read(src/a.py)"),
    ("Glob", {"pattern": "**/*.py"}, "Find **/*.py", "Glob"),
    ("Glob", {"pattern": "*.py", "path": "src"}, "Find *.py in src", "Glob"),
    ("Grep", {"pattern": "def {x}"}, 'Search "def {x}" in .', "Grep"),
    ("Grep", {"pattern": "x", "path": "src"}, 'Search "x" in src', "Grep"),
    ("LS", {}, "List .", "LS"),
    ("LS", {"path": "src"}, "List src", "LS"),
    ("Edit", {"path": "src/a.py", "old_string": "one", "new_string": "1"}, "Edit src/a.py",
     "Edit(src/a.py)"),
    ("MultiEdit", {"path": "src/a.py", "edits": EDITS}, "Edit src/a.py (2 changes)",
     "Edit(src/a.py)"),
    ("MultiEdit", {"path": "src/a.py", "edits": EDITS[:1]}, "Edit src/a.py (1 change)",
     "Edit(src/a.py)"),
    ("Write", {"path": "new/b.py", "content": "x\n"}, "Write new/b.py", "Edit(new/b.py)"),
    ("Bash", {"command": "git status --short"}, "Run: git status --short",
     "Bash(git status:*)"),
    ("Bash", {"command": "  make\nls"}, "Run: make", "Bash(make\nls)"),
    ("Bash", {"command": " "}, "Run:  ", "Bash()"),
    ("TodoWrite", {"todos": TODOS}, "Update the plan (2 tasks)", "TodoWrite"),
    ("Task", {"description": "find {the} loop", "prompt": "Where is it?"},
     "Task: find {the} loop", "Task"),
]
PATH_TOOLS = {"Read", "Glob", "Grep", "LS", "Edit", "MultiEdit", "Write"}


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("one\ntwo\n")
    return ToolContext(tmp_path.resolve())


@pytest.mark.parametrize(("tool", "raw", "title", "rule"), CALLS)
def test_title_and_rule(ctx, tool, raw, title, rule):
    t = TOOLS[tool]
    inp = t.normalise(msgspec.convert(raw, t.input_type), ctx)
    assert (t.title(inp, ctx), t.rule_for(inp, ctx)) == (title, rule)


@pytest.mark.parametrize(("tool", "raw"), [(c[0], c[1]) for c in CALLS])
def test_normalise_resolves_the_path_of_path_tools_only(ctx, tool, raw):
    t = TOOLS[tool]
    inp = msgspec.convert(raw, t.input_type)
    out = t.normalise(inp, ctx)
    if tool in PATH_TOOLS:
        assert out.path == str(ctx.workspace / getattr(inp, "path"))
        assert out == msgspec.structs.replace(inp, path=out.path)
        with pytest.raises(ToolError, match="outside the workspace"):
            t.normalise(msgspec.structs.replace(inp, path="/etc/passwd"), ctx)
    else:
        assert out is inp


@pytest.mark.parametrize(("tool", "raw"), [(c[0], c[1]) for c in CALLS])
async def test_preview_kind(ctx, tool, raw):
    t = TOOLS[tool]
    preview = await t.preview(t.normalise(msgspec.convert(raw, t.input_type), ctx), ctx)
    kind = {"Edit": DiffPreview, "MultiEdit": DiffPreview, "Write": DiffPreview,
            "Bash": CommandPreview}.get(tool, type(None))
    assert type(preview) is kind
    if tool == "Bash":
        assert preview == CommandPreview(raw["command"], str(ctx.workspace))
