"""Settings files: loading, merging, bad settings, and saving rules back into them."""

from __future__ import annotations

import hashlib
import os
import tomllib
from pathlib import Path

import pytest

from heddle.permissions.policy import PermissionPolicy, SettingsWriteError
from heddle.permissions.store import add_rule, dump, remove_rule
from heddle.permissions.trust import (TrustMismatch, review_project, rewrite_project,
                                      trust_project)
from heddle.rules import Rule
from heddle.model.limits import BUDGET_ONLY, NO_THINKING, ModelLimits, model_limits
from heddle.settings import (HookCommand, HookSettings, ModelLimitSettings, Settings,
                             load_settings, project_settings_path, user_settings_path)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"XDG_CONFIG_HOME": str(tmp_path / "config")}


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    return tmp_path / "ws"


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_paths(tmp_path, ws):
    assert user_settings_path({"XDG_CONFIG_HOME": "/cfg"}) == Path("/cfg/heddle/settings.toml")
    assert user_settings_path({"HOME": "/h"}).name == "settings.toml"
    assert project_settings_path(ws) == ws / ".heddle/settings.toml"


def test_no_files_means_defaults(env, ws):
    loaded = load_settings(ws, env)
    assert loaded.settings == Settings() and loaded.warnings == []
    assert PermissionPolicy.from_settings(loaded).mode == "default"


def test_project_over_user_and_lists_concatenated_with_scopes(env, ws):
    write(user_settings_path(env), """
model = "user-model"
fallback_model = "small"
[permissions]
mode = "acceptEdits"
allow = ["Bash(git status:*)"]
deny = ["Read(~/.ssh/**)"]
[[hooks.PreToolUse]]
matcher = "Bash"
command = "user-hook"
[[hooks.Stop]]
command = "stop-hook"
timeout = 5
[tools]
pass_env = ["GITHUB_TOKEN"]
""")
    write(project_settings_path(ws), """
model = "project-model"
[permissions]
mode = "plan"
allow = ["Edit(src/**)"]
ask = ["Bash(git push:*)"]
[[hooks.PreToolUse]]
command = "project-hook"
""")
    trust_project(ws, environ=env)  # the project file widens: it applies once trusted
    loaded = load_settings(ws, env)
    assert loaded.untrusted is None
    s = loaded.settings
    assert (s.model, s.fallback_model, s.permissions.mode) == ("project-model", "small", "plan")
    assert s.permissions.allow == ["Bash(git status:*)", "Edit(src/**)"]
    assert [h.command for h in s.hooks.pre_tool_use] == ["user-hook", "project-hook"]
    assert s.hooks.stop == [HookCommand("stop-hook", timeout=5)]
    assert s.tools.pass_env == ["GITHUB_TOKEN"]
    policy = PermissionPolicy.from_settings(loaded)
    assert policy.rules == [Rule("allow", "Bash(git status:*)", "user"),
                            Rule("deny", "Read(~/.ssh/**)", "user"),
                            Rule("allow", "Edit(src/**)", "project"),
                            Rule("ask", "Bash(git push:*)", "project")]
    assert PermissionPolicy.from_settings(loaded, "default").mode == "default"  # asked for


def test_bad_settings_are_dropped_one_by_one_never_raised(env, ws):
    write(user_settings_path(env), "this is = not [toml")
    write(project_settings_path(ws), """
model = 7
colour = "blue"
[permissions]
mode = "yolo"
allow = ["Bash(ls:*)", 3, "Edit("]
deny = ["Read(.env)"]
[[hooks.PreToolUse]]
command = "ok"
[[hooks.PreToolUse]]
comand = "typo"
""")
    trust_project(ws, environ=env)
    loaded = load_settings(ws, env)
    s = loaded.settings
    assert s.model is None and s.permissions.mode is None
    assert s.permissions.allow == ["Bash(ls:*)"] and s.permissions.deny == ["Read(.env)"]
    assert [h.command for h in s.hooks.pre_tool_use] == ["ok"]
    text = "\n".join(loaded.warnings)
    assert "is not valid TOML" in text and "using the defaults instead" in text
    for fragment in ("model: Expected `str | null`, got `int`", "colour: unknown setting",
                     "permissions.mode:", "permissions.allow[1]: Expected `str`",
                     "'Edit(' is not a rule", "hooks.PreToolUse[1]:"):
        assert fragment in text


@pytest.mark.timeout(10)
@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "huge"])
def test_a_settings_file_that_is_no_file_is_a_warning_and_never_waits(env, ws, kind):
    path = project_settings_path(ws)
    path.parent.mkdir()
    if kind == "fifo":  # reading it would wait for a writer, forever
        os.mkfifo(path)
    elif kind == "dev-zero":  # a symlink a cloned repository can carry; it never ends
        path.symlink_to("/dev/zero")
    else:
        path.write_bytes(b"# " + b"x" * (2 << 20) + b"\n")
    loaded = load_settings(ws, env)
    assert loaded.settings == Settings()
    (warning,) = loaded.warnings
    assert warning.startswith(f"cannot read {path}") and "using the defaults" in warning
    assert ("named pipe", "device", "larger than")[["fifo", "dev-zero", "huge"].index(kind)] \
        in warning


def test_a_section_of_the_wrong_type_is_ignored(env, ws):
    write(project_settings_path(ws), 'permissions = "all"\ntools = {pass_env = "X"}\n')
    loaded = load_settings(ws, env)
    assert loaded.settings == Settings()
    assert any("permissions: expected a table" in w for w in loaded.warnings)


def test_add_and_remove_keep_the_rest_of_the_file(tmp_path):
    path = tmp_path / "settings.toml"
    path.write_text('# mine\nmodel = "m"  # keep\n\n[permissions]\n# allowed\nallow = [\n'
                    '  "Bash(ls:*)",\n]\ndeny = ["Read(.env)"]\n\n[[hooks.Stop]]\ncommand = "x"\n')
    assert add_rule(path, "allow", "Bash(git status:*)")
    assert not add_rule(path, "allow", "Bash(git status:*)")  # already there
    assert add_rule(path, "ask", 'Bash(echo "a\\b")')
    assert remove_rule(path, "deny", "Read(.env)")
    assert not remove_rule(path, "deny", "Read(.env)")
    text = path.read_text()
    assert text.startswith('# mine\nmodel = "m"  # keep\n') and "# allowed\n" in text
    assert tomllib.loads(text) == {
        "model": "m", "hooks": {"Stop": [{"command": "x"}]},
        "permissions": {"allow": ["Bash(ls:*)", "Bash(git status:*)"], "deny": [],
                        "ask": ['Bash(echo "a\\b")']}}


def test_add_creates_the_file_and_edits_an_inline_table(tmp_path):
    fresh = tmp_path / "new/.heddle/settings.toml"
    add_rule(fresh, "allow", "Edit(src/**)")
    assert fresh.read_text() == '[permissions]\nallow = [\n  "Edit(src/**)",\n]\n'
    inline = tmp_path / "inline.toml"
    inline.write_text('permissions = { allow = ["A"] }\nmodel = "m"\n')
    add_rule(inline, "deny", "B")
    assert tomllib.loads(inline.read_text()) == {
        "model": "m", "permissions": {"allow": ["A"], "deny": ["B"]}}


def test_a_broken_file_is_never_overwritten(tmp_path):
    path = tmp_path / "settings.toml"
    path.write_text("allow = [")
    with pytest.raises(SettingsWriteError, match="is not valid TOML"):
        add_rule(path, "allow", "Bash")
    assert path.read_text() == "allow = ["


def test_dump_round_trips():
    data = {"model": "m", "n": 3, "on": True, "permissions": {"allow": ["a\n\"b\""]},
            "hooks": {"PreToolUse": [{"command": "c", "timeout": 1.5}]}}
    assert tomllib.loads(dump(data)) == data


def test_saved_rules_are_read_again_by_the_next_session(env, ws):
    policy = PermissionPolicy.from_settings(load_settings(ws, env))
    policy.add(Rule("allow", "Bash(make:*)", "project"))
    policy.add(Rule("deny", "Bash(rm:*)", "user"))
    policy.add(Rule("allow", "Bash(ls:*)"))  # session only
    again = PermissionPolicy.from_settings(load_settings(ws, env))
    assert again.rules == [Rule("deny", "Bash(rm:*)", "user"),
                           Rule("allow", "Bash(make:*)", "project")]
    assert again.revoke("Bash(make:*)") == [Rule("allow", "Bash(make:*)", "project")]
    assert PermissionPolicy.from_settings(load_settings(ws, env)).rules == [
        Rule("deny", "Bash(rm:*)", "user")]
    with pytest.raises(SettingsWriteError, match="no project settings file"):
        PermissionPolicy().add(Rule("allow", "Bash", "project"))


WIDENS = """
model = "project-model"
[permissions]
mode = "bypassPermissions"
allow = ["Bash"]
deny = ["Read(.env)"]
ask = ["Bash(git push:*)"]
[[hooks.PostToolUse]]
command = "./fmt.sh"
[tools]
pass_env = ["AWS_SECRET_ACCESS_KEY"]
"""


def test_what_project_settings_widen_waits_for_trust_of_that_content(env, ws):
    path = project_settings_path(ws)
    write(path, WIDENS)
    loaded = load_settings(ws, env)
    s = loaded.settings
    assert (s.model, s.permissions.mode) == ("project-model", None)
    assert (s.permissions.allow, s.permissions.deny, s.permissions.ask) == (
        [], ["Read(.env)"], ["Bash(git push:*)"])
    assert s.hooks == HookSettings() and s.tools.pass_env == []
    assert loaded.untrusted.ignored == [
        "permission mode bypassPermissions", "allow rule Bash", "PostToolUse hook `./fmt.sh`",
        "tools see the secret AWS_SECRET_ACCESS_KEY"]
    assert loaded.untrusted.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert loaded.warnings == [
        f"{path} is not trusted, so Heddle ignores what it would enable: permission mode "
        "bypassPermissions; allow rule Bash; PostToolUse hook `./fmt.sh`; tools see the secret "
        f"AWS_SECRET_ACCESS_KEY. Check the file, then trust it with `heddle trust -w {ws}` (deny "
        "rules, ask rules and a stricter mode from it apply already)."]
    assert PermissionPolicy.from_settings(loaded).mode == "default"

    with pytest.raises(TrustMismatch, match="is not the content asked to be trusted"):
        trust_project(ws, "0" * 64, env)
    assert load_settings(ws, env).untrusted is not None  # nothing was recorded
    assert trust_project(ws, loaded.untrusted.sha256, env).enables == loaded.untrusted.ignored
    trusted = load_settings(ws, env)
    assert trusted.untrusted is None and trusted.warnings == []
    assert (trusted.settings.permissions.mode, trusted.settings.permissions.allow) == (
        "bypassPermissions", ["Bash"])
    assert [h.command for h in trusted.settings.hooks.post_tool_use] == ["./fmt.sh"]

    write(path, WIDENS + "# one more line\n")  # any change: trust again
    assert load_settings(ws, env).settings.permissions.mode is None
    other = ws.parent / "other"
    other.mkdir()
    write(project_settings_path(other), WIDENS + "# one more line\n")  # trust is per workspace
    assert load_settings(other, env).untrusted is not None


def test_a_mode_counts_as_widening_relative_to_the_users(env, ws):
    write(user_settings_path(env), '[permissions]\nmode = "acceptEdits"\n')
    for mode, applied in (("plan", "plan"), ("default", "default"),
                          ("acceptEdits", "acceptEdits"), ("bypassPermissions", "acceptEdits")):
        write(project_settings_path(ws), f'[permissions]\nmode = "{mode}"\n')
        loaded = load_settings(ws, env)
        assert loaded.settings.permissions.mode == applied, mode
        assert (loaded.untrusted is None) == (mode != "bypassPermissions"), mode


def test_rules_the_user_saves_keep_a_trusted_file_trusted(env, ws):
    write(project_settings_path(ws), '[permissions]\nallow = ["Bash(make:*)"]\n')
    policy = PermissionPolicy.from_settings(load_settings(ws, env))
    assert policy.rules == []  # not trusted yet
    policy.add(Rule("allow", "Bash(ls:*)", "project"))
    assert load_settings(ws, env).untrusted.ignored == ["allow rule Bash(make:*)",
                                                        "allow rule Bash(ls:*)"]
    trust_project(ws, environ=env)
    policy = PermissionPolicy.from_settings(load_settings(ws, env))
    policy.add(Rule("allow", "Bash(pytest:*)", "project"))
    policy.revoke("Bash(make:*)")
    again = load_settings(ws, env)
    assert again.untrusted is None
    assert again.settings.permissions.allow == ["Bash(ls:*)", "Bash(pytest:*)"]


def test_a_change_someone_else_makes_while_a_rule_is_saved_is_not_trusted_with_it(env, ws):
    path = project_settings_path(ws)
    hook = '\n[[hooks.Stop]]\ncommand = "touch stopped"\n'

    def someone_else():  # another process, in the moment the user's rule is saved
        write(path, path.read_text() + hook)

    def before_the_write():
        someone_else()
        return add_rule(path, "allow", "Bash(ls:*)")

    def after_the_write():
        saved = add_rule(path, "allow", "Bash(ls:*)")
        someone_else()
        return saved

    def with_the_rule_already_there():
        write(path, '[permissions]\nallow = ["Bash(make:*)", "Bash(ls:*)"]\n' + hook)
        return add_rule(path, "allow", "Bash(ls:*)")

    for race in (before_the_write, after_the_write, with_the_rule_already_there):
        write(path, '[permissions]\nallow = ["Bash(make:*)"]\n')
        trust_project(ws, environ=env)
        rewrite_project(load_settings(ws, env).files, race)
        loaded = load_settings(ws, env)
        assert loaded.untrusted is not None, race.__name__
        assert loaded.untrusted.ignored == ["allow rule Bash(make:*)", "allow rule Bash(ls:*)",
                                            "Stop hook `touch stopped`"], race.__name__
        assert not review_project(ws, env).trusted


def test_model_limits_merge_per_key_and_a_bad_value_is_ignored_alone(env, ws):
    write(user_settings_path(env), """
[models."local-"]
context_window = 32768
[models."qwen"]
max_output_tokens = 4096
""")
    write(project_settings_path(ws), """
[models."local-"]
max_output_tokens = 2048
[models."broken"]
context_window = "big"
[models."tiny"]
context_window = 10
""")
    loaded = load_settings(ws, env)  # not trusted: model limits widen nothing, so they apply
    models = loaded.settings.models
    assert models["local-"] == ModelLimitSettings(max_output_tokens=2048)  # project over user
    assert models["qwen"] == ModelLimitSettings(max_output_tokens=4096)
    # a bad value is ignored alone, with a warning: the entry keeps the table's number there
    assert models["broken"] == models["tiny"] == ModelLimitSettings()
    text = "\n".join(loaded.warnings)
    assert "models.broken.context_window: Expected `int | null`, got `str`" in text
    assert "models.tiny.context_window: Expected `int` >= 1024" in text
    assert model_limits("local-7b", models) == ModelLimits(200_000, 2048)
    assert model_limits("qwen-coder", models) == ModelLimits(200_000, 4096)
    assert model_limits("claude-opus-4-1-20250805") == ModelLimits(200_000, 32_000, BUDGET_ONLY)
    assert model_limits("claude-opus-4-5-20251101") == ModelLimits(200_000, 64_000, BUDGET_ONLY)
    assert model_limits("claude-3-5-haiku-latest") == ModelLimits(200_000, 8192, NO_THINKING)
    assert model_limits("someone-elses-model") == ModelLimits(200_000, 32_000)
