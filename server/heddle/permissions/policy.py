"""Permission decisions: deny rules, the plan mode (and its plan tool), Heddle's own files,
ask, allow, then the mode; what is left asks.

A session's policy holds its mode, its rules (each with a scope: the session, the project's
settings file or the user's), its tool hooks and the secrets its tools may see. Rules saved
with project or user scope are written to their settings file, so the next session reads them
again. Calls that would change Heddle's own settings always ask (`heddle.permissions.protected`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Literal, Protocol

from heddle.core.events import Preview
from heddle.core.hunks import HunkDecision
from heddle.core.tools import Tool, ToolContext
from heddle.rules import (EDIT_TOOLS, KINDS, Rule, RuleError, RuleKind, RuleScope, allowing,
                          check_rule, covers, parse_rule, path_matches, rule_matches)
from heddle.permissions.plan import PLAN_TOOL, not_planning, plan_refusal
from heddle.permissions.protected import NOTE, protected
from heddle.permissions.store import SettingsWriteError, add_rule, remove_rule
from heddle.permissions.trust import rewrite_project
from heddle.settings import HookSettings, LoadedSettings, PermissionMode, SettingsFiles

Mode = PermissionMode
MODES: tuple[Mode, ...] = ("default", "acceptEdits", "plan", "bypassPermissions")

__all__ = ["Allow", "Ask", "Asker", "Decision", "Deny", "EDIT_TOOLS", "MODES", "Mode",
           "PermissionAnswer", "PermissionPolicy", "PermissionPrompt", "Rule", "RuleError",
           "SettingsWriteError", "parse_rule", "rule_matches"]


@dataclass(frozen=True)
class Allow:
    reason: str


@dataclass(frozen=True)
class Deny:
    message: str


@dataclass(frozen=True)
class Ask:
    rule: str
    """The rule "allow always" would save; empty: this call can only be allowed once."""
    note: str | None = None
    """Why it asks, when the prompt should say so."""


Decision = Allow | Deny | Ask


@dataclass(frozen=True)
class PermissionPrompt:
    tool_call_id: str
    tool: str
    input: dict[str, Any]
    title: str
    preview: Preview | None
    rule: str
    loop: bool = False
    """Not a call's permission: whether a turn the repeat guard caught may go on (allow: it
    goes on; reject: it ends)."""


@dataclass(frozen=True)
class PermissionAnswer:
    decision: Literal["allowOnce", "allowAlways", "reject"]
    rule: str | None = None
    message: str | None = None
    reason: str | None = None
    """Set when nobody was asked (e.g. the client cannot answer)."""
    scope: RuleScope | None = None
    """With allowAlways: where to keep the rule. None: the session."""
    hunks: tuple[HunkDecision, ...] = ()
    """An edit answered hunk by hunk (checked against the preview's hunks); unlisted hunks
    are accepted."""
    final_text: str | None = None
    """The user's own text for an edit, instead of the proposal."""
    mode: Mode | None = None
    """An approved plan: the permission mode the session goes on in. None: `default`."""


class Asker(Protocol):
    async def __call__(self, prompt: PermissionPrompt) -> PermissionAnswer: ...


def _where(rule: Rule) -> str:
    return "a session rule" if rule.scope == "session" else f"{rule.scope} settings"


class PermissionPolicy:
    def __init__(self, mode: Mode = "default", allow: Iterable[str] = (),
                 deny: Iterable[str] = (), ask: Iterable[str] = (), rules: Iterable[Rule] = (),
                 hooks: HookSettings | None = None, files: SettingsFiles | None = None,
                 pass_env: Iterable[str] = ()):
        self.mode: Mode = mode
        self.rules: list[Rule] = list(rules) + [
            Rule(kind, check_rule(p)) for kind, patterns in (("allow", allow), ("deny", deny),
                                                             ("ask", ask)) for p in patterns]
        self.hooks = hooks or HookSettings()
        self.files = files
        """Where project and user rules are saved; None: only session rules can be added."""
        self.pass_env = tuple(pass_env)
        """Secret-looking environment variables tool processes may see all the same."""
        self.on_session_rules: Callable[[list[Rule]], None] | None = None
        """Called with the session's own rules after they change (its transcript keeps them)."""

    @classmethod
    def from_settings(cls, loaded: LoadedSettings, mode: Mode | None = None) -> PermissionPolicy:
        rules = [Rule(kind, pattern, scope)
                 for scope, settings in (("user", loaded.user), ("project", loaded.project))
                 for kind in KINDS for pattern in getattr(settings.permissions, kind)]
        return cls(mode or loaded.settings.permissions.mode or "default", rules=rules,
                   hooks=loaded.settings.hooks, files=loaded.files,
                   pass_env=loaded.settings.tools.pass_env)

    def patterns(self, kind: RuleKind) -> list[str]:
        return [r.pattern for r in self.rules if r.kind == kind]

    @property
    def allow(self) -> list[str]:
        return self.patterns("allow")

    @property
    def deny(self) -> list[str]:
        return self.patterns("deny")

    @property
    def ask(self) -> list[str]:
        return self.patterns("ask")

    # -- changing rules -------------------------------------------------------------------------
    def add(self, rule: Rule) -> Rule:
        """Add a rule; project and user rules are saved to their file first.

        RuleError if the rule does not parse, SettingsWriteError if it cannot be saved.
        """
        rule = Rule(rule.kind, check_rule(rule.pattern), rule.scope)
        if rule.scope != "session":
            path = self._file(rule.scope)
            self._rewrite(rule.scope, lambda: add_rule(path, rule.kind, rule.pattern))
        if rule not in self.rules:
            self.rules.append(rule)
            if rule.scope == "session":
                self._session_rules_changed()
        return rule

    def revoke(self, pattern: str, kind: RuleKind | None = None,
               scope: RuleScope | None = None) -> list[Rule]:
        """Remove matching rules (from their file too); returns what was removed."""
        wanted = check_rule(pattern)
        gone = [r for r in self.rules if (kind is None or r.kind == kind)
                and (scope is None or r.scope == scope) and _same(r.pattern, wanted)]
        for rule in gone:
            if rule.scope != "session":
                path = self._file(rule.scope)
                self._rewrite(rule.scope, lambda: remove_rule(path, rule.kind, rule.pattern))
            self.rules.remove(rule)
        if any(r.scope == "session" for r in gone):
            self._session_rules_changed()
        return gone

    def _rewrite(self, scope: str, write) -> None:
        """The user changed a rule: a trusted project file stays trusted."""
        if scope == "project" and self.files is not None:
            rewrite_project(self.files, write)
        else:
            write()

    def _session_rules_changed(self) -> None:
        if self.on_session_rules is not None:
            self.on_session_rules([r for r in self.rules if r.scope == "session"])

    def _file(self, scope: str) -> Path:
        path = self.files.for_scope(scope) if self.files else None
        if path is None:
            raise SettingsWriteError(f"this session has no {scope} settings file")
        return path

    # -- deciding -------------------------------------------------------------------------------
    def allows_outside(self, tool_name: str, path: Path, workspace: Path) -> bool:
        """Whether an allow or ask rule with a path pattern lets `tool_name` use `path` although
        it is outside the workspace."""
        for rule in self.rules:
            if rule.kind == "deny":
                continue
            name, pattern = parse_rule(rule.pattern)
            if pattern and covers(name, tool_name) and path_matches(pattern, path, workspace):
                return True
        return False

    def protects(self, tool: Tool, inp: Any, ctx: ToolContext) -> bool:
        """Whether the call may change Heddle's own settings, rules, trust or hook scripts."""
        if tool.read_only:
            return False
        guard = protected(ctx.workspace, self.files, self.hooks)
        path, command = getattr(inp, "path", None), getattr(inp, "command", None)
        return ((isinstance(path, str) and guard.covers(Path(path)))
                or (isinstance(command, str) and guard.mentioned_in(command)))

    def _first(self, kind: RuleKind, tool: Tool, inp: Any, ctx: ToolContext) -> Rule | None:
        return next((r for r in self.rules
                     if r.kind == kind and rule_matches(r.pattern, tool, inp, ctx, kind)), None)

    def decide(self, tool: Tool, inp: Any, ctx: ToolContext, hook: str | None = None,
               hook_reason: str | None = None) -> Decision:
        """`hook`: what the PreToolUse hooks said (`allow` or `ask`; a hook's deny never gets
        here)."""
        if rule := self._first("deny", tool, inp, ctx):
            return Deny(f"{tool.name} is denied by the rule {rule.pattern} ({_where(rule)}).")
        if tool.name == PLAN_TOOL:
            return Ask("") if self.mode == "plan" else Deny(not_planning(self.mode))
        read_only = tool.read_only
        if self.mode == "plan" and not read_only:
            if (why := plan_refusal(tool, inp, ctx.workspace)) is not None:
                return Deny(why)
            read_only = True  # a read-only command line
        if self.mode != "bypassPermissions" and self.protects(tool, inp, ctx):
            return Ask("", NOTE)  # before every allow: only a yes to this very call will do
        if hook == "ask" or self._first("ask", tool, inp, ctx):
            return Ask(tool.rule_for(inp, ctx))
        if hook == "allow":
            return Allow(f"PreToolUse hook{': ' + hook_reason if hook_reason else ''}")
        if self.mode == "bypassPermissions":
            return Allow("mode bypassPermissions")
        if rules := allowing(self.rules, tool, inp, ctx):  # a Bash line may need several
            return Allow(f"rule{'s' if len(rules) > 1 else ''} "
                         + ", ".join(f"{r.pattern} ({_where(r)})" for r in rules))
        if read_only:
            return Allow("read-only tool" if tool.read_only else "read-only command, plan mode")
        if self.mode == "acceptEdits" and tool.name in EDIT_TOOLS:
            return Allow("mode acceptEdits")
        return Ask(tool.rule_for(inp, ctx))


def _same(a: str, b: str) -> bool:
    try:
        return check_rule(a) == b
    except RuleError:
        return a == b
