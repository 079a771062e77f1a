"""Saving rules into settings files people wrote: their comments, layout and other tables stay,
and a file that cannot be edited safely is never overwritten."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from heddle.permissions.store import SettingsWriteError, add_rule, remove_rule

COMMENTED = """\
# Heddle settings for this project   (the layout is mine)
model = "claude-sonnet-4-5"   # the fast one

[permissions]
# what runs without asking
allow = [
    "Bash(git status:*)",   # read-only
    # "Bash(git push:*)",   maybe later
    "Bash(pytest:*)",       # tests
]
deny = [ "Read(.env)" ]     # secrets

[tools]
pass_env = ["GITHUB_TOKEN"]

[[hooks.PreToolUse]]
matcher = "Bash"            # only shell commands
command = "./check.sh"
"""


def settings(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "settings.toml"
    path.write_text(text)
    return path


def test_comments_and_layout_survive_adding_and_removing(tmp_path):
    path = settings(tmp_path, COMMENTED)
    assert add_rule(path, "allow", "Edit(src/**)")
    assert add_rule(path, "ask", "Bash(git commit:*)")
    assert remove_rule(path, "allow", "Bash(pytest:*)")
    text = path.read_text()
    assert text == COMMENTED.replace(
        '    "Bash(pytest:*)",       # tests\n', "").replace(
        '    # "Bash(git push:*)",   maybe later\n',
        '    # "Bash(git push:*)",   maybe later\n    "Edit(src/**)",\n').replace(
        'deny = [ "Read(.env)" ]     # secrets\n',
        'deny = [ "Read(.env)" ]     # secrets\nask = [\n  "Bash(git commit:*)",\n]\n')
    assert tomllib.loads(text)["permissions"] == {
        "allow": ["Bash(git status:*)", "Edit(src/**)"], "deny": ["Read(.env)"],
        "ask": ["Bash(git commit:*)"]}
    assert remove_rule(path, "allow", "Bash(git status:*)")
    assert "# read-only" not in path.read_text()  # a rule's own comment goes with it
    assert "# what runs without asking" in path.read_text()


def test_inline_tables_dotted_keys_and_inline_arrays_keep_their_form(tmp_path):
    inline = settings(tmp_path, 'permissions = { allow = ["A"], mode = "plan" }  # inline\n')
    add_rule(inline, "allow", "B")
    add_rule(inline, "deny", "C")
    assert inline.read_text() == (
        'permissions = { allow = ["A", "B"], mode = "plan", deny = ["C"]}  # inline\n')
    dotted = settings(tmp_path, 'permissions.allow = ["A"]\nmodel = "m"\n')
    add_rule(dotted, "allow", "B")
    remove_rule(dotted, "allow", "A")
    assert dotted.read_text() == 'permissions.allow = ["B"]\nmodel = "m"\n'
    assert tomllib.loads(dotted.read_text()) == {"permissions": {"allow": ["B"]}, "model": "m"}


def test_other_tables_stay_where_they_are(tmp_path):
    path = settings(tmp_path, '[tools]\npass_env = []\n\n[permissions.extra]\nx = 1\n'
                              '\n[[hooks.Stop]]\ncommand = "c"\n')
    add_rule(path, "deny", 'Bash(echo "a\\b")')
    data = tomllib.loads(path.read_text())
    assert data == {"tools": {"pass_env": []},
                    "permissions": {"extra": {"x": 1}, "deny": ['Bash(echo "a\\b")']},
                    "hooks": {"Stop": [{"command": "c"}]}}
    assert path.read_text().startswith("[tools]\npass_env = []\n")
    no_permissions = settings(tmp_path, 'model = "m"  # mine\n')
    add_rule(no_permissions, "allow", "Grep")
    assert no_permissions.read_text() == (
        'model = "m"  # mine\n\n[permissions]\nallow = [\n  "Grep",\n]\n')


def test_values_that_are_not_rules_are_kept(tmp_path):
    path = settings(tmp_path, '[permissions]\nallow = ["A", 3, "B", "A"]\n')
    assert remove_rule(path, "allow", "A")
    assert path.read_text() == '[permissions]\nallow = [3, "B"]\n'


@pytest.mark.parametrize("text,why", [
    ("allow = [", "is not valid TOML"),
    ('[permissions]\nallow = ["A"]\nallow = ["B"]\n', "is not valid TOML"),
    ("[permissions]\nallow = [\"A\"\n", "is not valid TOML"),
    ('permissions = "all"\n', "permissions is not a table"),
    ('[[permissions]]\nallow = ["A"]\n', "permissions is not a table"),
    ('[permissions]\nallow = "Bash"\n', "permissions.allow is not an array"),
])
def test_a_file_that_cannot_be_edited_safely_is_never_overwritten(tmp_path, text, why):
    path = settings(tmp_path, text)
    os.chmod(path, 0o600)
    for change in (lambda: add_rule(path, "allow", "Bash"),
                   lambda: remove_rule(path, "allow", "A")):
        with pytest.raises(SettingsWriteError, match=why):
            change()
        assert path.read_text() == text
    assert [p.name for p in tmp_path.iterdir()] == ["settings.toml"]  # no temporary file left


def test_the_file_mode_is_kept(tmp_path):
    path = settings(tmp_path, "[permissions]\n")
    os.chmod(path, 0o640)
    add_rule(path, "allow", "Read")
    assert path.stat().st_mode & 0o777 == 0o640


def test_a_settings_file_that_is_a_symlink_is_written_through(tmp_path):
    (tmp_path / "dotfiles").mkdir()
    real = settings(tmp_path / "dotfiles", "[permissions]\n")
    link = tmp_path / "settings.toml"
    link.symlink_to(real)
    add_rule(link, "allow", "Read")
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert tomllib.loads(real.read_text())["permissions"]["allow"] == ["Read"]
    assert [p.name for p in real.parent.iterdir()] == ["settings.toml"]  # no temporary left


@pytest.mark.timeout(10)
@pytest.mark.parametrize("kind", ["a named pipe", "a folder"])
def test_a_settings_path_that_is_no_file_is_refused_at_once(tmp_path, kind):
    path = tmp_path / "settings.toml"
    os.mkfifo(path) if kind == "a named pipe" else path.mkdir()
    with pytest.raises(SettingsWriteError, match=f"cannot read .*{kind}"):
        add_rule(path, "allow", "Bash(ls:*)")
    with pytest.raises(SettingsWriteError, match=f"cannot read .*{kind}"):
        remove_rule(path, "allow", "Bash(ls:*)")
