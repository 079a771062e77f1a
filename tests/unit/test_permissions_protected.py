"""Heddle's own files: a call that would change its settings, rules, trust record or hook
scripts asks in every mode but bypassPermissions, and no rule, hook or "allow always" approves
it in advance — whatever the route (Write, Edit, MultiEdit, Bash), path spelling or symlink."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from heddle.core.events import PermissionAnswered
from heddle.core.tools import ToolContext
from heddle.permissions.policy import Allow, Ask, Deny, PermissionAnswer, PermissionPolicy
from heddle.rpc import convert
from heddle.settings import HookCommand, HookSettings, SettingsFiles
from heddle.tools.registry import builtin_tools
from unit.test_tools_executor import Asker, execute

TOOLS = builtin_tools()
EDITS = {  # a valid input for each editing tool, minus the path
    "Write": {"content": "[permissions]\nmode = 'bypassPermissions'\n"},
    "Edit": {"old_string": "", "new_string": "x"},
    "MultiEdit": {"edits": [{"old_string": "", "new_string": "x"}]},
}
WIDE_OPEN = ["Edit", "Edit(**)", "Write", "Write(**)", "MultiEdit", "Bash", "Edit(/**)",
             "Edit(~/**)"]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = (tmp_path / "ws").resolve()
    (root / ".heddle").mkdir(parents=True)
    (root / "src").mkdir()
    (root / "scripts").mkdir()
    (root / "scripts/check.py").write_text("print('ok')\n")
    (root / "link-to-settings").symlink_to(root / ".heddle")
    return root


@pytest.fixture
def files(tmp_path: Path, ws: Path) -> SettingsFiles:
    return SettingsFiles(tmp_path / "config/heddle/settings.toml", ws / ".heddle/settings.toml")


def policy(files: SettingsFiles, mode: str, allow=WIDE_OPEN, hooks=None) -> PermissionPolicy:
    return PermissionPolicy(mode, allow=allow, files=files, hooks=hooks)


def decide(p: PermissionPolicy, ws: Path, tool: str, hook: str | None = None, **raw):
    ctx = ToolContext(ws, outside_allowed=lambda name, path: p.allows_outside(name, path, ws))
    inp = TOOLS[tool].normalise(msgspec.convert(raw, TOOLS[tool].input_type), ctx)
    return p.decide(TOOLS[tool], inp, ctx, hook)


SPELLINGS = [
    ".heddle/settings.toml",
    "src/../.heddle/settings.toml",
    "./.heddle/hooks/check.py",
    ".HEDDLE/settings.toml",          # one file on case-insensitive file systems
    ".Heddle/rules.toml",
    "link-to-settings/settings.toml",  # a symlink into .heddle
    "{ws}/.heddle/settings.toml",
    "src/.heddle/settings.toml",       # the project settings of a folder opened on its own
    ".vscode/settings.json",           # the extension reads heddle.permissionMode from there
    "src/.VSCode/settings.json",
    "app.code-workspace",
]


@pytest.mark.parametrize("tool", sorted(EDITS))
@pytest.mark.parametrize("raw", SPELLINGS)
@pytest.mark.parametrize("mode", ["default", "acceptEdits"])
def test_project_settings_always_ask_whatever_the_rules(ws, files, tool, raw, mode):
    p = policy(files, mode)
    decision = decide(p, ws, tool, path=raw.format(ws=ws), **EDITS[tool])
    assert isinstance(decision, Ask) and decision.rule == ""  # no "allow always" offered
    assert decision.note == "it changes Heddle's own settings, so it always asks"
    # a PreToolUse hook's allow does not approve it either
    assert isinstance(decide(p, ws, tool, "allow", path=raw.format(ws=ws), **EDITS[tool]), Ask)


def test_only_bypass_runs_it_and_plan_and_deny_still_refuse(ws, files):
    write = {"path": ".heddle/settings.toml", **EDITS["Write"]}
    assert isinstance(decide(policy(files, "bypassPermissions"), ws, "Write", **write), Allow)
    assert isinstance(decide(policy(files, "plan"), ws, "Write", **write), Deny)
    denied = PermissionPolicy("bypassPermissions", deny=["Write"], files=files)
    assert isinstance(decide(denied, ws, "Write", **write), Deny)
    # the rest of the workspace is not affected
    assert decide(policy(files, "acceptEdits", allow=[]), ws, "Write", path="src/a.py",
                  content="x") == Allow("mode acceptEdits")
    assert decide(policy(files, "default"), ws, "Write", path="src/a.py",
                  content="x") == Allow("rule Edit (a session rule)")
    # reading the settings is fine
    assert isinstance(decide(policy(files, "default"), ws, "Read",
                             path=".heddle/settings.toml"), Allow)


@pytest.mark.parametrize("name", ["settings.toml", "trusted-workspaces.json", "hooks/pre.py"])
def test_the_user_config_folder_always_asks(ws, files, name):
    target = files.user.parent / name
    for mode in ("default", "acceptEdits"):
        decision = decide(policy(files, mode, allow=WIDE_OPEN + [f"Edit({files.user.parent}/**)"]),
                          ws, "Write", path=str(target), content="x")
        assert isinstance(decision, Ask) and decision.rule == "", (mode, name)


def test_a_symlinked_settings_folder_is_protected_where_it_really_is(ws, files):
    real = ws / "src/real-settings"
    real.mkdir()
    (ws / ".heddle").rmdir()
    (ws / ".heddle").symlink_to(real)
    p = policy(files, "acceptEdits")
    for raw in ("src/real-settings/settings.toml", ".heddle/settings.toml"):
        assert isinstance(decide(p, ws, "Write", path=raw, content="x"), Ask), raw
    bash = decide(p, ws, "Bash", command=f"cp evil.toml {real}/settings.toml")
    assert isinstance(bash, Ask) and bash.rule == ""


def test_files_a_hook_runs_always_ask(ws, files):
    hooks = HookSettings(stop=[HookCommand("python3 scripts/check.py")],
                         pre_tool_use=[HookCommand("$HEDDLE_PROJECT_DIR/scripts/pre.sh")])
    p = policy(files, "acceptEdits", allow=["Bash"], hooks=hooks)
    for raw in ("scripts/check.py", "scripts/pre.sh"):
        assert decide(p, ws, "Write", path=raw, content="x").rule == "", raw
    assert decide(p, ws, "Bash", command="cat > scripts/check.py < /tmp/x").rule == ""
    assert isinstance(decide(p, ws, "Bash", command="python3 --version"), Allow)
    # the hook's folder itself is not protected, nor the rest of the workspace
    assert isinstance(decide(p, ws, "Write", path="scripts/other.py", content="x"), Allow)


BASH_ROUTES = [
    "echo '[permissions]' > .heddle/settings.toml",
    "printf 'mode = \"bypassPermissions\"' >> ./.HEDDLE/settings.toml",
    "cp /tmp/x ~/.config/heddle/settings.toml",
    "cat x > \"$XDG_CONFIG_HOME/heddle/settings.toml\"",
    "heddle trust --yes",
    "python -m heddle trust -y -w .",
    "cp /tmp/x .vscode/settings.json",
]


@pytest.mark.parametrize("command", BASH_ROUTES)
def test_shell_commands_that_name_heddles_files_ask_even_when_a_rule_allows_them(
        ws, files, command):
    p = policy(files, "acceptEdits", allow=["Bash", f"Bash({command.split()[0]}:*)"])
    decision = decide(p, ws, "Bash", command=command)
    assert isinstance(decision, Ask) and decision.rule == "", command
    assert isinstance(decide(p, ws, "Bash", "allow", command=command), Ask)
    assert isinstance(decide(policy(files, "bypassPermissions"), ws, "Bash", command=command),
                      Allow)


def test_other_shell_commands_keep_their_rules(ws, files):
    p = policy(files, "acceptEdits", allow=["Bash(echo:*)"])
    assert isinstance(decide(p, ws, "Bash", command="echo hi > /dev/null"), Allow)


def test_the_prompt_offers_no_allow_always_for_protected_calls(ws, files):
    from heddle.permissions.policy import PermissionPrompt
    prompt = PermissionPrompt("t0", "Write", {}, "Write .heddle/settings.toml", None, "")
    options = convert.permission_params("s", "t", prompt).options
    assert [o.decision for o in options] == ["allowOnce", "reject"]
    offered = PermissionPrompt("t0", "Write", {}, "Write a.py", None, "Edit(a.py)")
    assert [o.decision for o in convert.permission_params("s", "t", offered).options] == [
        "allowOnce", "allowAlways", "reject"]


async def test_allow_always_for_a_protected_call_allows_it_once_and_keeps_no_rule(ws, files):
    ctx = ToolContext(ws)
    p = policy(files, "acceptEdits", allow=[])
    asker = Asker(PermissionAnswer("allowAlways", rule="Edit(**)", scope="project"),
                  PermissionAnswer("reject"))
    write = ("Write", {"path": ".heddle/settings.toml", "content": "[permissions]\n"})
    results, events = await execute(ctx, p, asker, write, write)
    assert [r.is_error for r in results] == [False, True]  # the second call asked again
    assert [a.rule for a in asker.prompts] == ["", ""]
    assert asker.prompts[0].title == ("Write .heddle/settings.toml (it changes Heddle's own "
                                      "settings, so it always asks)")
    first = [e for e in events if isinstance(e, PermissionAnswered)][0]
    assert (first.decision, first.rule, first.scope) == ("allowAlways", None, None)
    assert first.reason.startswith("allowed once: no rule is kept for this call")
    assert p.rules == [] and files.project.read_text() == "[permissions]\n"
