"""Permission decisions: rules first (deny beats allow), then the mode; what is left asks."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from heddle.loop.events import Preview
from heddle.tools.base import Tool, ToolContext

Mode = Literal["default", "acceptEdits", "plan", "bypassPermissions"]
MODES: tuple[Mode, ...] = ("default", "acceptEdits", "plan", "bypassPermissions")
EDIT_TOOLS = frozenset({"Edit", "Write", "MultiEdit"})


@dataclass(frozen=True)
class Allow:
    reason: str


@dataclass(frozen=True)
class Deny:
    message: str


@dataclass(frozen=True)
class Ask:
    rule: str


Decision = Allow | Deny | Ask


@dataclass(frozen=True)
class PermissionPrompt:
    tool_call_id: str
    tool: str
    input: dict[str, Any]
    title: str
    preview: Preview | None
    rule: str


@dataclass(frozen=True)
class PermissionAnswer:
    decision: Literal["allowOnce", "allowAlways", "reject"]
    rule: str | None = None
    message: str | None = None
    reason: str | None = None
    """Set when nobody was asked (e.g. the client cannot answer)."""


class Asker(Protocol):
    async def __call__(self, prompt: PermissionPrompt) -> PermissionAnswer: ...


def parse_rule(rule: str) -> tuple[str, str | None]:
    rule = rule.strip()
    if rule.endswith(")") and "(" in rule:
        name, _, rest = rule.partition("(")
        return name.strip(), rest[:-1]
    return rule, None


def rule_matches(rule: str, tool: Tool, inp: Any, ctx: ToolContext) -> bool:
    name, pattern = parse_rule(rule)
    if name != tool.name:
        return False
    if pattern is None or pattern in ("", "*"):
        return True
    if tool.name == "Bash":
        command = inp.command.strip()
        if pattern.endswith(":*"):
            prefix = pattern[:-2]
            return command == prefix or command.startswith(prefix + " ")
        return command == pattern
    path = getattr(inp, "path", None)
    if path is None:
        return False
    expanded = str(Path(pattern).expanduser()) if pattern.startswith("~") else pattern
    rel = ctx.relative(Path(path))
    return any(fnmatch.fnmatchcase(candidate, expanded) for candidate in (rel, path))


@dataclass
class PermissionPolicy:
    mode: Mode = "default"
    allow: list[str] = field(default_factory=list)
    deny: list[str] = field(default_factory=list)

    def decide(self, tool: Tool, inp: Any, ctx: ToolContext) -> Decision:
        for rule in self.deny:
            if rule_matches(rule, tool, inp, ctx):
                return Deny(f"{tool.name} is denied by the rule {rule}")
        if self.mode == "bypassPermissions":
            return Allow("mode bypassPermissions")
        if self.mode == "plan" and not tool.read_only:
            return Deny(f"{tool.name} is not available in plan mode: only read-only tools run. "
                        "Describe the change you would make instead.")
        for rule in self.allow:
            if rule_matches(rule, tool, inp, ctx):
                return Allow(f"rule {rule}")
        if tool.read_only:
            return Allow("read-only tool")
        if self.mode == "acceptEdits" and tool.name in EDIT_TOOLS:
            return Allow("mode acceptEdits")
        return Ask(tool.rule_for(inp, ctx))
