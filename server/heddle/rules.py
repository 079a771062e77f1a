"""Permission rules: `Tool` or `Tool(pattern)`, each allow / deny / ask, each with a scope.

Patterns depend on the tool. Bash: `Bash(git status)` is that command, `Bash(git status:*)` any
command starting with those words; a command line is read with a bash parser
(`heddle.commands`), and allow rules must cover every command it runs. Tools with a
path: a glob (wcmatch) over the resolved absolute path, relative to the workspace unless it
starts with `/` or `~` (`Edit(src/**)`, `Read(~/.ssh/**)`); `**` spans folders, `*` and `?`
stay inside one. A rule named `Edit` covers every tool that edits files, `Read` every tool that
reads them. MCP tools (`mcp__<server>__<tool>`) are named whole, or a server's at once:
`mcp__github` or `mcp__github__*` (every tool of the server `github`), `mcp__*` (every MCP tool).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Literal

from heddle.commands import RUNNERS, SHELLS, analyse, reachable, spellings

RuleKind = Literal["allow", "deny", "ask"]
RuleScope = Literal["session", "project", "user"]
KINDS: tuple[RuleKind, ...] = ("allow", "deny", "ask")
SCOPES: tuple[RuleScope, ...] = ("session", "project", "user")

EDIT_TOOLS = frozenset({"Edit", "MultiEdit", "Write"})
READ_TOOLS = frozenset({"Read", "Grep", "Glob", "LS"})
FAMILIES = {"Edit": EDIT_TOOLS, "Read": READ_TOOLS}
PLAN_TOOL = "PresentPlan"
"""The tool that ends plan mode: it asks the user to approve the plan (`heddle.tools.plan`)."""

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*|mcp__([A-Za-z0-9_-]+__)?\*")
MCP = "mcp__"


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
    if rule_tool == tool_name or tool_name in FAMILIES.get(rule_tool, ()):
        return True
    if not rule_tool.startswith(MCP) or not tool_name.startswith(MCP):
        return False
    if rule_tool.endswith("*"):  # mcp__* or mcp__<server>__*
        return tool_name.startswith(rule_tool[:-1])
    return "__" not in rule_tool[len(MCP):] and tool_name.startswith(rule_tool + "__")


def rule_matches(rule: str, tool: Any, inp: Any, ctx: Any, kind: RuleKind = "allow") -> bool:
    """Whether `rule` applies to this (normalised) call.

    For Bash, an allow rule must cover every command the line runs (`allowing` lets several
    rules share a line); deny and ask rules apply when any command matches.
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


def allowing(rules: Iterable[Rule], tool: Any, inp: Any, ctx: Any) -> list[Rule]:
    """The allow rules that allow this call: the first that matches it alone, else for a Bash
    command line, for each command it runs the first rule that covers it. Empty: none does."""
    rules = [r for r in rules if r.kind == "allow"]
    if alone := next((r for r in rules if rule_matches(r.pattern, tool, inp, ctx)), None):
        return [alone]
    if tool.name != "Bash":
        return []
    patterns = []
    for rule in rules:
        try:
            name, pattern = parse_rule(rule.pattern)
        except RuleError:
            continue
        if covers(name, tool.name) and pattern is not None:
            patterns.append((rule, pattern))
    line = analyse(inp.command)
    if line.opaque or not line.commands:
        return []
    used: list[Rule] = []
    for command in line.commands:
        rule = next((r for r, p in patterns if _covers(p, command.words)), None)
        if rule is None:
            return []
        if rule not in used:
            used.append(rule)
    return used


# --- paths ----------------------------------------------------------------------------------

_MAGIC = re.compile(r"[*?[\\]")


@lru_cache(maxsize=512)
def _matcher(pattern: str) -> Any:
    from wcmatch import glob
    patterns = [pattern] + ([pattern[:-3] or "/"] if pattern.endswith("/**") else [])
    return glob.compile(patterns, flags=glob.GLOBSTAR | glob.DOTGLOB | glob.CASE | glob.FORCEUNIX)


def _escape(literal: str) -> str:
    # wcmatch is imported at the first path rule decision, not at daemon start
    from wcmatch import glob
    return glob.escape(literal)


def _absolute_pattern(pattern: str, workspace: str) -> str:
    """The glob over absolute paths: the base (the workspace, home or `/`) and the pattern's
    literal leading folders resolved (a symlinked home or folder matches resolved paths) and
    escaped, so a `[` or `*` in them is just a character."""
    if pattern.startswith("~"):
        user, _, rest = pattern.partition("/")
        base = os.path.expanduser(user)
        if base == user:  # an unknown user: a name in the workspace, as written
            base, rest = workspace, pattern
    elif pattern.startswith("/"):
        base, rest = "/", pattern.lstrip("/")
    else:
        base, rest = workspace, pattern
    parts = rest.split("/")
    literal = next((i for i, p in enumerate(parts) if _MAGIC.search(p)), len(parts))
    head = os.path.realpath(os.path.join(base, *parts[:literal]))
    tail = "/".join(parts[literal:])
    return _escape(head).rstrip("/") + "/" + tail if tail else _escape(head)


def path_matches(pattern: str, path: Path, workspace: Path) -> bool:
    """Whether the resolved absolute `path` matches the rule's glob (`src/**` is `src` too).
    The literal part is resolved at every call: a symlink changed meanwhile counts."""
    return bool(_matcher(_absolute_pattern(pattern, str(workspace))).match(str(path)))


# --- shell commands -------------------------------------------------------------------------

@lru_cache(maxsize=512)
def _rule_words(pattern: str) -> tuple[tuple[str, ...], tuple[str, ...], bool] | None:
    """(the words as written, unquoted, whether it is a prefix) of a Bash pattern that is one
    simple command; None for any other pattern (it can only match a whole line)."""
    prefix = pattern.endswith(":*")
    line = analyse(pattern[:-2] if prefix else pattern)
    if line.opaque or len(line.commands) != 1:
        return None
    return line.commands[0].words, line.commands[0].plain, prefix


def _starts(words: tuple[str, ...], rule: tuple[str, ...], prefix: bool) -> bool:
    return words[:len(rule)] == rule if prefix else words == rule


def _covers(pattern: str, words: tuple[str, ...]) -> bool:
    """Whether a Bash allow pattern covers one simple command."""
    rule = _rule_words(pattern)
    return rule is not None and bool(rule[0]) and _starts(words, rule[0], rule[2])


def _prefix_match(prefix: str, command: str) -> bool:
    return command == prefix or command.startswith(prefix + " ")


def command_matches(pattern: str, command: str, any_part: bool) -> bool:
    """Whether a Bash pattern matches a command line. An allow pattern (`any_part` False) must
    cover every command the line runs, and nothing opaque may happen; a deny or ask pattern
    matches when any command it may run matches, however it is spelled."""
    line = command.strip()
    if line == pattern.strip():
        return True
    if any_part:
        rule = _rule_words(pattern)
        if pattern.endswith(":*") and _prefix_match(pattern[:-2].strip(), line):
            return True
        return rule is not None and any(
            _starts(words, r, rule[2]) for r in rule[:2] if r
            for command_ in reachable(command) for words in spellings(command_))
    analysis = analyse(command)
    return (analysis.opaque is None and bool(analysis.commands)
            and all(_covers(pattern, c.words) for c in analysis.commands))


_PLAIN_WORD = re.compile(r"[A-Za-z0-9][\w.:/@+-]*")
_PLAIN_NAME = re.compile(r"[\w./+@-]+")


def bash_rule_for(command: str) -> str:
    """The rule "allow always" offers: a prefix of the first words for a simple command, the
    exact command line otherwise — for a compound one (a prefix rule would not cover it) and
    for a command that runs others (`bash -c …`, `xargs …`, `env …`: a prefix would allow
    anything)."""
    exact = f"Bash({command.strip()})"
    line = analyse(command)
    if line.opaque or len(line.commands) != 1:
        return exact
    words = line.commands[0].words
    name = os.path.basename(words[0])
    if not _PLAIN_NAME.fullmatch(words[0]) or "=" in words[0] or name in RUNNERS | SHELLS:
        return exact
    plain = len(words) > 1 and _PLAIN_WORD.fullmatch(words[1]) is not None
    rule = f"Bash({' '.join(words[:2]) if plain else words[0]}:*)"
    return rule if command_matches(rule[5:-1], command, any_part=False) else exact
