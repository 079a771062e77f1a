"""Glob's pattern matcher agrees with ripgrep's own globs, and says what is wrong with a bad one."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from heddle.core.tools import ToolError
from heddle.tools.globs import compile_glob
from heddle.tools.search import ripgrep

NAMES = ["a.py", "b.md", ".hidden.py", "src/a.py", "src/test_x.js", "src/util/test_y.ts",
         "src/util/h.py", "lib/a.js", "weird[1].txt", "st*r.txt", "docs/x.md",
         "docs/deep/er/y.md", "srcx/a.py", "a-b/c.py", "ab/c.py", "abc.txt", "new\nline.txt"]

PATTERNS = ["*", "**", "**/*", "*.py", "**/*.py", "src/*", "src/**", "src/**/*.{js,ts}",
            "**/test_*.{js,ts}", "[ab]*", "[!a]*", "?.py", "a**", "**/a.*", "{src,lib}/*.js",
            "{src/**/*.py,*.md}", "docs/**/*.md", "docs/**/y.md", "weird\\[1\\].txt",
            "weird[[]1].txt", "st\\*r.txt", "a/**", "src/**/", "**/util/*", "ab*/c.py",
            "*[0-9]*", "[a-c]*.txt", "*/*/*", "new?line.txt"]
NOTHING = {"a/**", "src/**/"}  # no such folder; folders only


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("globs")
    for name in NAMES:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x\n")
    return root


@pytest.mark.parametrize("pattern", PATTERNS)
def test_matches_what_ripgrep_matches(tree, pattern):
    # no ignore files in this tree, so ripgrep's --glob picks exactly the files it matches
    listed = subprocess.run([ripgrep(), "--files", "--null", "--hidden", "--glob", "/" + pattern],
                            cwd=tree, capture_output=True, timeout=30, check=False)
    assert listed.returncode in (0, 1), listed.stderr
    by_ripgrep = sorted(n for n in listed.stdout.decode().split("\0") if n)
    matches = compile_glob(pattern).fullmatch
    assert sorted(n for n in NAMES if matches(n)) == by_ripgrep
    assert by_ripgrep or pattern in NOTHING


@pytest.mark.parametrize("pattern,problem", [("src/{a,b", "a { is not closed"),
                                             ("[ab", "a [ is not closed")])
def test_a_bad_pattern_is_a_clear_error(pattern, problem):
    with pytest.raises(ToolError, match=re.escape(f"invalid glob '{pattern}': {problem}")):
        compile_glob(pattern)
