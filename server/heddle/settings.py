"""Settings: a typed, defaulted struct read from the user's and the project's TOML files.

    $XDG_CONFIG_HOME/heddle/settings.toml   (default ~/.config/heddle/settings.toml)  user
    <workspace>/.heddle/settings.toml                                               project

The project file wins for single values; lists (permission rules, hooks, `pass_env`) are
concatenated, user first, and each rule remembers the file it came from. A file that cannot
be read or parsed is ignored; a setting with the wrong type is ignored on its own (a bad hook
does not cost the deny rules next to it). Every problem is logged and returned as a warning;
nothing here raises.

What in the project file widens permissions (allow rules, a more permissive mode than the
user's, hooks, `pass_env`, MCP servers) applies only once the user has trusted that exact content
(`heddle.permissions.trust`); until then it is ignored with a warning. What only narrows
(deny and ask rules, a stricter mode) and the model settings apply at once.
"""

from __future__ import annotations

import logging
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Mapping, TypeVar, get_args, get_origin

import msgspec

from heddle import trust_store
from heddle.rules import RuleError, check_rule
from heddle.regular import read_regular
from heddle.xdg import config_dir

log = logging.getLogger(__name__)

PermissionMode = Literal["default", "acceptEdits", "plan", "bypassPermissions"]
MODE_RANK: dict[str, int] = {"plan": 0, "default": 1, "acceptEdits": 2, "bypassPermissions": 3}
"""From the strictest mode to the most permissive."""
DEFAULT_HOOK_TIMEOUT = 60.0


class HookCommand(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    command: str
    """Run with `bash -c` in the workspace; gets the event as JSON on stdin."""
    matcher: str | None = None
    """Regular expression over the tool name (`Edit|Write`). Omitted, "" or "*": every tool."""
    timeout: float = DEFAULT_HOOK_TIMEOUT
    """Seconds before the hook is killed (with its whole process group)."""

    def matches(self, tool_name: str) -> bool:
        if self.matcher in (None, "", "*"):
            return True
        try:
            return re.fullmatch(self.matcher, tool_name) is not None
        except re.error:
            return self.matcher == tool_name


class HookSettings(msgspec.Struct, forbid_unknown_fields=True, frozen=True,
                   rename={"pre_tool_use": "PreToolUse", "post_tool_use": "PostToolUse",
                           "stop": "Stop"}):
    pre_tool_use: list[HookCommand] = []
    post_tool_use: list[HookCommand] = []
    stop: list[HookCommand] = []


class PermissionSettings(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    mode: PermissionMode | None = None
    """Mode of new sessions that do not ask for one. Omitted: `default`."""
    allow: list[str] = []
    deny: list[str] = []
    ask: list[str] = []


class ToolSettings(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    pass_env: list[str] = []
    """Environment variables passed to tool processes even though they look like secrets."""


class ModelLimitSettings(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """The limits of the models whose id starts with this entry's key (`[models."qwen"]`), in
    place of the built-in table's (`heddle.model.limits`), for new or local models."""

    context_window: Annotated[int, msgspec.Meta(ge=1024)] | None = None
    """Tokens the model reads; omitted: the table's (200,000 for a model it does not know)."""
    max_output_tokens: Annotated[int, msgspec.Meta(ge=1)] | None = None
    """The highest `max_tokens` the endpoint accepts; omitted: the table's (32,000 for a
    model it does not know)."""
    thinking: Literal["adaptive", "both", "budget", "none"] | None = None
    """The forms of `thinking` it takes: `{"type": "adaptive"}`, a `budget_tokens` one, both,
    or none; omitted: the table's (for a model it does not know: only a budget the settings
    or the session set)."""


class McpServerSettings(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """`[mcp.servers.NAME]`: one MCP server, `command` (stdio) or `url` (streamable HTTP)."""

    command: str | None = None
    args: list[str] = []
    env: dict[str, str] = {}
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = {}
    pass_env: list[str] = []
    """Secret-looking variables of Heddle's environment the server sees all the same."""
    trust_read_only: bool = False
    """Run the tools the server marks `readOnlyHint` without asking (user settings only)."""
    timeout: float | None = None
    """Seconds one tool call may take (omitted: 120)."""

    def shown(self) -> str:
        """The server as the trust warning names it (no env or header values: secrets)."""
        return self.url or " ".join([self.command or "", *self.args])


class McpSettings(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    servers: dict[str, McpServerSettings] = {}
    startup_timeout: float | None = None
    """Seconds a new session waits for its servers before its first model call (omitted: 5;
    0: it does not wait)."""


class EditorSettings(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """`[editor]`: how Heddle works with the editor's documents."""

    diagnostics_wait: Annotated[float, msgspec.Meta(ge=0, le=60)] | None = None
    """Seconds an edit of a document open in the editor waits at most for the editor's
    diagnostics of the new text, to tell the model of new errors and warnings; 0: do not ask.
    Omitted: `HEDDLE_DIAGNOSTICS_WAIT`, else 2."""


CacheTtl = Literal["5m", "1h"]


class CacheSettings(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """`[cache]`: prompt caching and context editing. Omitted: the daemon's default (its
    environment: `HEDDLE_PROMPT_CACHE`, `HEDDLE_PROMPT_CACHE_TTL`, `HEDDLE_CONTEXT_EDITING`)."""

    prompt_cache: bool | None = None
    """Send `cache_control` breakpoints (false for endpoints that reject them)."""
    ttl: CacheTtl | None = None
    """Lifetime of the cache entries: `5m` (the API's default) or `1h` (writes cost 2x)."""
    context_editing: bool | None = None
    """Clear old tool results through the endpoint's context editing (beta
    `context-management-2025-06-27`) instead of in Heddle's copy of the history."""

    def over(self, defaults: CacheSettings) -> CacheSettings:
        return CacheSettings(*(mine if mine is not None else default for mine, default in
                               zip(msgspec.structs.astuple(self),
                                   msgspec.structs.astuple(defaults))))


_ON, _OFF = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def cache_from_env(env: Mapping[str, str]) -> tuple[CacheSettings, list[str]]:
    """The daemon's cache defaults from its environment, and a warning per bad value.
    Context editing defaults to on for Anthropic's API (no `ANTHROPIC_BASE_URL`) only."""
    warnings: list[str] = []

    def flag(name: str, default: bool) -> bool:
        raw = (env.get(name) or "").strip().lower()
        if raw in _ON or raw in _OFF:
            return raw in _ON
        if raw:
            warnings.append(f"{name}={raw} is neither 1 nor 0; using {int(default)}")
        return default

    ttl = (env.get("HEDDLE_PROMPT_CACHE_TTL") or "5m").strip()
    if ttl not in get_args(CacheTtl):
        warnings.append(f"HEDDLE_PROMPT_CACHE_TTL={ttl} is not 5m or 1h; using 5m")
        ttl = "5m"
    return CacheSettings(flag("HEDDLE_PROMPT_CACHE", True), ttl,  # type: ignore[arg-type]
                         flag("HEDDLE_CONTEXT_EDITING", not env.get("ANTHROPIC_BASE_URL"))
                         ), warnings


Repetitions = Annotated[int, msgspec.Meta(ge=0, le=100)]


class LoopSettings(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """`[loop]`: the repeat guard (`heddle.loop.repeats`). Omitted: the default."""

    warn_at: Repetitions | None = None
    """Repetitions of the same call (or cycle of calls) with the same results at which the
    model is warned in the result (omitted: 3; 0: never; 1 is refused: every call would be a
    repetition)."""
    stop_at: Repetitions | None = None
    """Repetitions from which the call does not run and the user is asked whether the turn
    goes on (omitted: 4; 0: never; 1 is refused)."""


Effort = Literal["low", "medium", "high", "xhigh", "max"]
ThinkingSetting = Literal["auto", "off"] | Annotated[int, msgspec.Meta(ge=1024)]


class Settings(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    model: str | None = None
    fallback_model: str | None = None
    thinking: ThinkingSetting | None = None
    """`auto` (omitted too): on for the models that think, adaptive where the model takes it,
    else a budget of 16,000 tokens; `off`; or a budget in tokens (at least 1024)."""
    effort: Effort | None = None
    """`output_config.effort` for the models that take it; omitted: the model's default."""
    models: dict[str, ModelLimitSettings] = {}
    """Per model id prefix; the longest matching key applies."""
    permissions: PermissionSettings = PermissionSettings()
    hooks: HookSettings = HookSettings()
    tools: ToolSettings = ToolSettings()
    cache: CacheSettings = CacheSettings()
    mcp: McpSettings = McpSettings()
    editor: EditorSettings = EditorSettings()
    loop: LoopSettings = LoopSettings()


@dataclass(frozen=True)
class SettingsFiles:
    user: Path
    project: Path | None

    def for_scope(self, scope: str) -> Path | None:
        return {"user": self.user, "project": self.project}.get(scope)

    @property
    def trust(self) -> Path:
        """The record of trusted project settings, beside the user settings."""
        return self.user.parent / trust_store.TRUST_FILE


@dataclass(frozen=True)
class Untrusted:
    """Project settings that would widen permissions, ignored until the user trusts them."""

    file: Path
    sha256: str
    """Of the file's content as read: what `workspace/trust` may be asked to confirm."""
    ignored: list[str]
    """What they would enable, one line each."""

    @property
    def message(self) -> str:
        """The warning: what is ignored, and how to trust it."""
        shown = [_short(line) for line in self.ignored[:8]]
        more = len(self.ignored) - len(shown)
        listed = "; ".join(shown) + (f"; and {more} more" if more > 0 else "")
        return (f"{self.file} is not trusted, so Heddle ignores what it would enable: {listed}. "
                f"Check the file, then trust it with `heddle trust -w {self.file.parent.parent}` "
                "(deny rules, ask rules and a stricter mode from it apply already).")


@dataclass(frozen=True)
class LoadedSettings:
    settings: Settings
    """User and project merged: what the session runs with."""
    user: Settings
    project: Settings
    """What applies of the project file: all of it once trusted, else only what narrows."""
    files: SettingsFiles
    warnings: list[str] = field(default_factory=list)
    untrusted: Untrusted | None = None
    """Set when part of the project file is ignored because it is not trusted."""


def user_settings_path(environ: Mapping[str, str] | None = None) -> Path:
    return config_dir(environ) / "settings.toml"


def project_settings_path(workspace: Path) -> Path:
    return workspace / ".heddle" / "settings.toml"


def load_settings(workspace: Path | None, environ: Mapping[str, str] | None = None
                  ) -> LoadedSettings:
    files = SettingsFiles(user_settings_path(environ),
                          project_settings_path(workspace) if workspace is not None else None)
    warnings: list[str] = []
    user = read_file(files.user, warnings)
    project, untrusted = Settings(), None
    if workspace is not None and files.project is not None:
        data = read_bytes(files.project, warnings)
        if data is not None:  # parsed from the very bytes whose digest is checked
            project = parse_settings(data, files.project, warnings)
            ignored = widening(project, user)
            if ignored and trust_store.trusted_digest(files.trust, workspace) != trust_store.digest(data):
                untrusted = Untrusted(files.project, trust_store.digest(data), ignored)
                project = narrowed(project, user)
                warnings.append(untrusted.message)
    for warning in warnings:
        log.warning("settings: %s", warning)
    return LoadedSettings(merge(user, project), user, project, files, warnings, untrusted)


SETTINGS_LIMIT = 1 << 20
"""Bytes a settings file may hold: more is not a settings file (`/dev/zero` behind a link)."""


def read_bytes(path: Path, warnings: list[str]) -> bytes | None:
    try:
        return read_regular(path, SETTINGS_LIMIT)  # a pipe or a device would never end
    except FileNotFoundError:
        return None
    except OSError as exc:
        warnings.append(f"cannot read {path}: {exc}; using the defaults instead")
        return None


def read_file(path: Path, warnings: list[str]) -> Settings:
    """One settings file; missing → defaults; every problem → a warning and that part ignored."""
    data = read_bytes(path, warnings)
    return Settings() if data is None else parse_settings(data, path, warnings)


def parse_settings(raw: bytes, path: Path, warnings: list[str]) -> Settings:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        warnings.append(f"cannot read {path}: {exc}; using the defaults instead")
        return Settings()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        warnings.append(f"{path} is not valid TOML ({exc}); using the defaults instead")
        return Settings()
    problems: list[str] = []
    settings = _lenient(data, Settings, "", problems)
    settings = _drop_bad_rules(settings, problems)
    settings = _check_loop(settings, problems)
    warnings.extend(f"{path}: {p}" for p in problems)
    return settings


S = TypeVar("S", bound=msgspec.Struct)


def _lenient(data: Any, typ: type[S], where: str, problems: list[str]) -> S:
    """Convert `data`, keeping every field (and list item) that is valid on its own."""
    if not isinstance(data, dict):
        problems.append(f"{where}: expected a table, got {type(data).__name__} (ignored)")
        return typ()
    try:
        return msgspec.convert(data, typ)
    except msgspec.ValidationError:
        pass
    fields = {f.encode_name: f for f in msgspec.structs.fields(typ)}
    values: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{where}.{key}" if where else key
        info = fields.get(key)
        if info is None:
            problems.append(f"{name}: unknown setting (ignored)")
        elif isinstance(info.type, type) and issubclass(info.type, msgspec.Struct):
            values[info.name] = _lenient(value, info.type, name, problems)
        elif _struct_values(info.type) and isinstance(value, dict):  # one bad entry alone
            values[info.name] = {k: _lenient(v, _struct_values(info.type), f"{name}.{k}",
                                             problems) for k, v in value.items()}
        elif get_origin(info.type) is list and isinstance(value, list):
            (item_type,) = get_args(info.type)
            items = [_convert(v, item_type, f"{name}[{i}]", problems) for i, v in enumerate(value)]
            values[info.name] = [v for v in items if v is not _BAD]
        elif get_origin(info.type) is dict and isinstance(value, dict):
            _, item_type = get_args(info.type)
            entries = {k: _convert(v, item_type, f"{name}.{k}", problems)
                       for k, v in value.items()}
            values[info.name] = {k: v for k, v in entries.items() if v is not _BAD}
        else:
            converted = _convert(value, info.type, name, problems)
            if converted is not _BAD:
                values[info.name] = converted
    return typ(**values)


_BAD = object()


def _struct_values(typ: Any) -> Any:
    """The Struct type of a `dict[str, Struct]` field; None for any other type."""
    if get_origin(typ) is dict:
        value = get_args(typ)[1]
        if isinstance(value, type) and issubclass(value, msgspec.Struct):
            return value
    return None


def _convert(value: Any, typ: Any, where: str, problems: list[str]) -> Any:
    try:
        return msgspec.convert(value, typ)
    except msgspec.ValidationError as exc:
        problems.append(f"{where}: {exc} (ignored)")
        return _BAD


def _drop_bad_rules(settings: Settings, problems: list[str]) -> Settings:
    def valid(kind: str, rules: list[str]) -> list[str]:
        kept = []
        for i, rule in enumerate(rules):
            try:
                check_rule(rule)
            except RuleError as exc:
                problems.append(f"permissions.{kind}[{i}]: {exc} (ignored)")
            else:
                kept.append(rule)
        return kept

    p = settings.permissions
    return msgspec.structs.replace(settings, permissions=msgspec.structs.replace(
        p, allow=valid("allow", p.allow), deny=valid("deny", p.deny), ask=valid("ask", p.ask)))


def _check_loop(settings: Settings, problems: list[str]) -> Settings:
    """`[loop]` values that cannot mean anything are dropped (the default is used), with a
    problem saying why; a warning that could never come before the refusal is pointed out."""
    loop = settings.loop
    for name in ("warn_at", "stop_at"):
        if getattr(loop, name) == 1:
            problems.append(f"loop.{name}: 1 would count every call as a repetition; use 0 "
                            "(off) or 2 or more (ignored)")
            loop = msgspec.structs.replace(loop, **{name: None})
    warn, stop = loop.warn_at, loop.stop_at
    if warn and stop and warn >= stop:
        problems.append(f"loop.warn_at ({warn}) is not below loop.stop_at ({stop}): the model "
                        "is refused before it is ever warned")
    return msgspec.structs.replace(settings, loop=loop)


def merge(user: Settings, project: Settings) -> Settings:
    """Project over user; lists concatenated, user first."""
    up, pp = user.permissions, project.permissions
    uh, ph = user.hooks, project.hooks
    return Settings(
        model=project.model or user.model,
        fallback_model=project.fallback_model or user.fallback_model,
        thinking=user.thinking if project.thinking is None else project.thinking,
        effort=project.effort or user.effort,
        models={**user.models, **project.models},
        permissions=PermissionSettings(mode=pp.mode or up.mode, allow=up.allow + pp.allow,
                                       deny=up.deny + pp.deny, ask=up.ask + pp.ask),
        hooks=HookSettings(pre_tool_use=uh.pre_tool_use + ph.pre_tool_use,
                           post_tool_use=uh.post_tool_use + ph.post_tool_use,
                           stop=uh.stop + ph.stop),
        tools=ToolSettings(pass_env=user.tools.pass_env + project.tools.pass_env),
        cache=project.cache.over(user.cache),
        mcp=McpSettings(servers={**user.mcp.servers, **project.mcp.servers},
                        startup_timeout=user.mcp.startup_timeout
                        if project.mcp.startup_timeout is None else project.mcp.startup_timeout),
        editor=EditorSettings(diagnostics_wait=user.editor.diagnostics_wait
                              if project.editor.diagnostics_wait is None
                              else project.editor.diagnostics_wait),
        loop=LoopSettings(*(u if p is None else p for u, p in zip(
            msgspec.structs.astuple(user.loop), msgspec.structs.astuple(project.loop)))))


# --- trust ------------------------------------------------------------------------------------

def _widens_mode(mode: PermissionMode | None, user: Settings) -> bool:
    return mode is not None and MODE_RANK[mode] > MODE_RANK[user.permissions.mode or "default"]


def widening(project: Settings, user: Settings) -> list[str]:
    """What the project settings would enable beyond the user's: one line each, empty if they
    only narrow."""
    p, h = project.permissions, project.hooks
    out = [f"permission mode {p.mode}"] if _widens_mode(p.mode, user) else []
    out += [f"allow rule {rule}" for rule in p.allow]
    for event, hooks in (("PreToolUse", h.pre_tool_use), ("PostToolUse", h.post_tool_use),
                         ("Stop", h.stop)):
        out += [f"{event} hook `{' '.join(hook.command.split())}`" for hook in hooks]
    out += [f"tools see the secret {name}" for name in project.tools.pass_env]
    out += [f"MCP server {name} `{server.shown()}`" for name, server in project.mcp.servers.items()]
    return out


def narrowed(project: Settings, user: Settings) -> Settings:
    """Only what cannot widen permissions: the models, their limits and thinking, the cache
    and editor settings, deny and ask rules, a stricter mode (no MCP servers: they are programs
    of the workspace's)."""
    p = project.permissions
    return Settings(model=project.model, fallback_model=project.fallback_model,
                    thinking=project.thinking, effort=project.effort,
                    cache=project.cache, models=project.models, editor=project.editor,
                    loop=project.loop,
                    permissions=PermissionSettings(mode=None if _widens_mode(p.mode, user)
                                                   else p.mode, deny=p.deny, ask=p.ask))


def _short(line: str, limit: int = 100) -> str:
    return line if len(line) <= limit else line[:limit - 1] + "…"
