"""Permission rules: `Tool` or `Tool(pattern)`, each allow / deny / ask, each with a scope.

Patterns depend on the tool. Bash: `Bash(git status)` is that exact command line, `Bash(git
status:*)` any command starting with those words. Tools with a path: a glob over the resolved
absolute path, relative to the workspace unless it starts with `/` or `~` (`Edit(src/**)`,
`Read(~/.ssh/**)`); `**` spans folders, `*` and `?` stay inside one. A rule named `Edit` covers
every tool that edits files, `Read` every tool that reads them.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

RuleKind = Literal["allow", "deny", "ask"]
RuleScope = Literal["session", "project", "user"]
KINDS: tuple[RuleKind, ...] = ("allow", "deny", "ask")
SCOPES: tuple[RuleScope, ...] = ("session", "project", "user")

EDIT_TOOLS = frozenset({"Edit", "MultiEdit", "Write"})
READ_TOOLS = frozenset({"Read", "Grep", "Glob", "LS"})
FAMILIES = {"Edit": EDIT_TOOLS, "Read": READ_TOOLS}

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


class RuleError(ValueError):
    """A rule that cannot be parsed; the message says why."""


@dataclass(frozen=True)
class Rule:
    kind: RuleKind
    pattern: str
    """The rule as written: `Bash(git status:*)`."""
    scope: RuleScope = "session"


def parse_rule(rule: str) -> tuple[str, str | None]:
    """(tool name, pattern or None); RuleError if it is not `Name` or `Name(pattern)`."""
    text = rule.strip()
    name, paren, rest = text.partition("(")
    name = name.strip()
    if not _NAME.fullmatch(name):
        raise RuleError(f"{rule!r} is not a rule: expected Tool or Tool(pattern), e.g. "
                        "Bash(git status:*) or Edit(src/**)")
    if not paren:
        return name, None
    if not rest.endswith(")"):
        raise RuleError(f"{rule!r} is not a rule: the pattern must end with ')'")
    pattern = rest[:-1].strip()
    return name, (None if pattern in ("", "*") else pattern)


def check_rule(rule: str) -> str:
    """The rule, normalised (`Bash(*)` → `Bash`); RuleError if invalid."""
    name, pattern = parse_rule(rule)
    return name if pattern is None else f"{name}({pattern})"


def covers(rule_tool: str, tool_name: str) -> bool:
    return rule_tool == tool_name or tool_name in FAMILIES.get(rule_tool, ())


def rule_matches(rule: str, tool: Any, inp: Any, ctx: Any, kind: RuleKind = "allow") -> bool:
    """Whether `rule` applies to this (normalised) call.

    For Bash, allow rules must cover every part of a compound command; deny and ask rules
    apply when any part matches.
    """
    try:
        name, pattern = parse_rule(rule)
    except RuleError:
        return False
    if not covers(name, tool.name):
        return False
    if pattern is None:
        return True
    if tool.name == "Bash":
        return command_matches(pattern, inp.command, any_part=kind != "allow")
    path = getattr(inp, "path", None)
    return path is not None and path_matches(pattern, Path(path), ctx.workspace)


# --- paths ----------------------------------------------------------------------------------

def _segment(part: str) -> str:
    out, i = [], 0
    while i < len(part):
        c = part[i]
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and "]" in part[i + 2:]:
            end = part.index("]", i + 2)
            body = part[i + 1:end]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


@lru_cache(maxsize=512)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """An absolute glob as a regex: `**` is any number of folders (none included)."""
    parts = pattern.split("/")
    out = [_segment(parts[0])]
    for part in parts[1:]:
        out.append("(?:/.*)?" if part == "**" else "/" + _segment(part))
    return re.compile("".join(out))


def _absolute_pattern(pattern: str, workspace: Path) -> str:
    if pattern.startswith("~"):
        pattern = os.path.expanduser(pattern)
    if not pattern.startswith("/"):
        pattern = f"{workspace}/{pattern}"
    # resolve the literal part, so a symlinked home or folder matches the resolved paths
    parts = pattern.split("/")
    literal = next((i for i, p in enumerate(parts) if any(c in p for c in "*?[")), len(parts))
    head = os.path.realpath("/".join(parts[:literal]) or "/")
    tail = "/".join(parts[literal:])
    return head.rstrip("/") + ("/" + tail if tail else "") if head != "/" else "/" + tail


def path_matches(pattern: str, path: Path, workspace: Path) -> bool:
    return glob_regex(_absolute_pattern(pattern, workspace)).fullmatch(str(path)) is not None


# --- shell commands -------------------------------------------------------------------------

_REDIRECT = re.compile(r"(&>>?|>>?&?|<<?<?&?)\s*([^\s;&|<>()]*)")


def _safe_redirect(op: str, target: str) -> bool:
    if op.startswith("<<") or target.startswith("("):
        return False  # heredocs and process substitution
    if op.endswith("&"):
        return target.isdigit() or target == "-"
    return op[0] in "&>" and target == "/dev/null"


def split_command(command: str) -> tuple[list[str], bool]:
    """The simple commands of a command line and whether any part is opaque.

    Splits on `;`, `&&`, `||`, `|`, `&` and newlines outside quotes. Opaque: command or
    process substitution, a heredoc, or a redirection other than to /dev/null or another
    descriptor — a prefix rule cannot vouch for what those do.
    """
    parts: list[str] = []
    current: list[str] = []
    opaque = False
    quote = ""
    i, n = 0, len(command)
    while i < n:
        c = command[i]
        if quote == "'":
            quote = "" if c == "'" else quote
        elif c == "\\" and i + 1 < n:
            current.append(c)
            c = command[i + 1]
            i += 1
        elif c == "`" or command.startswith("$(", i):
            opaque = True
        elif quote == '"':
            quote = "" if c == '"' else quote
        elif c in "'\"":
            quote = c
        elif command.startswith(("&>", ">", "<"), i):
            m = _REDIRECT.match(command, i)
            target = command[m.end(1):].lstrip()[:1] if not m.group(2) else m.group(2)
            opaque = opaque or not _safe_redirect(m.group(1), target)
            current.append(m.group(0))
            i = m.end()
            continue
        elif command.startswith(("&&", "||"), i) or c in ";\n|&":
            parts.append("".join(current))
            current = []
            i += 2 if command.startswith(("&&", "||"), i) else 1
            continue
        current.append(c)
        i += 1
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()], opaque


def _prefix_match(prefix: str, command: str) -> bool:
    return command == prefix or command.startswith(prefix + " ")


def command_matches(pattern: str, command: str, any_part: bool) -> bool:
    command = command.strip()
    if not pattern.endswith(":*"):
        return command == pattern.strip()
    prefix = pattern[:-2].strip()
    parts, opaque = split_command(command)
    if any_part:
        return _prefix_match(prefix, command) or any(_prefix_match(prefix, p) for p in parts)
    return not opaque and bool(parts) and all(_prefix_match(prefix, p) for p in parts)


_PLAIN_WORD = re.compile(r"[A-Za-z0-9][\w.:/@+-]*")


def bash_rule_for(command: str) -> str:
    """The rule "allow always" offers: a prefix of the first words for a simple command, the
    exact command line otherwise (a prefix rule would not cover it)."""
    parts, opaque = split_command(command)
    if opaque or len(parts) != 1:
        return f"Bash({command.strip()})"
    words = parts[0].split()
    plain = len(words) > 1 and _PLAIN_WORD.fullmatch(words[1]) is not None
    return f"Bash({' '.join(words[:2]) if plain else words[0]}:*)"
