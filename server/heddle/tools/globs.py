"""Glob patterns with ripgrep's syntax, matched in Python: the Glob tool's patterns.

ripgrep's own `--glob` cannot pick the files: a glob that matches a folder (`**/*` matches
`build`) or a file lets ripgrep into it even when .gitignore excludes it. So Glob has ripgrep
list the files by its ignore rules alone and matches the paths here.
"""

from __future__ import annotations

import re

from heddle.core.tools import ToolError


def compile_glob(pattern: str) -> re.Pattern[str]:
    """A regex that fully matches the `/`-separated paths `pattern` matches.

    `*` and `?` stay within one path component (hidden names included), `**` as a whole
    component spans any number of folders (none too), `[abc]`/`[!abc]` are character classes,
    `{a,b}` alternatives (they may nest), and a backslash makes the next character literal.
    """
    out: list[str] = []
    depth = 0  # open `{`
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*" and pattern.startswith("**", i) and _component_starts(pattern, i, depth) \
                and _component_ends(pattern, i + 2, depth):
            if pattern.startswith("/", i + 2):
                out.append("(?:.*/)?")  # `**/`: any folders, or none
                i += 3
            else:
                out.append(".*")  # `**` at the end (or alone): everything below
                i += 2
            continue
        if c == "*":
            while pattern.startswith("*", i + 1):  # `a**b` is `a*b`
                i += 1
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = _class_end(pattern, i)
            body = pattern[i + 1:end]
            negate = body[:1] in ("!", "^")
            body = body[1:] if negate else body
            body = "".join(ch if ch == "-" else re.escape(ch) for ch in body)
            out.append("[" + ("^/" if negate else "") + body + "]")
            i = end
        elif c == "{":
            depth += 1
            out.append("(?:")
        elif c == "," and depth:
            out.append("|")
        elif c == "}" and depth:
            depth -= 1
            out.append(")")
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    if depth:
        raise ToolError(f"invalid glob {pattern!r}: a {{ is not closed")
    return re.compile("".join(out), re.DOTALL)


def _component_starts(pattern: str, i: int, depth: int) -> bool:
    return i == 0 or pattern[i - 1] == "/" or (depth > 0 and pattern[i - 1] in "{,")


def _component_ends(pattern: str, i: int, depth: int) -> bool:
    return i == len(pattern) or pattern[i] == "/" or (depth > 0 and pattern[i] in ",}")


def _class_end(pattern: str, start: int) -> int:
    """The index of the `]` that closes the class opened at `start` (a `]` first in the class,
    after an optional `!`, is a literal one)."""
    i = start + 1
    if pattern[i:i + 1] in ("!", "^"):
        i += 1
    if pattern[i:i + 1] == "]":
        i += 1
    end = pattern.find("]", i)
    if end < 0:
        raise ToolError(f"invalid glob {pattern!r}: a [ is not closed")
    return end
