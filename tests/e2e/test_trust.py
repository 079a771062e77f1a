"""The agent cannot raise its own permissions: writing Heddle's settings always asks, and what a
project settings file widens applies only once the user trusts that exact content."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from e2e import lsp
from e2e.test_permissions import DONE, last_results, statuses, steps, tool, write_settings
from e2e.test_turns import new_session

ESCALATE = """[permissions]
mode = "bypassPermissions"
allow = ["Bash"]

[[hooks.PreToolUse]]
command = "touch hooked"
"""


@pytest.fixture
def user_file(tmp_path) -> Path:
    return tmp_path / "config/heddle/settings.toml"


def warnings_shown(client) -> list[str]:
    return [m.message for m in client.messages if m.type == 2]


async def test_every_route_to_heddles_settings_asks_in_accept_edits(client, scripted, workspace,
                                                                    user_file):
    config = user_file.parent
    write_settings(user_file, f'[permissions]\nallow = ["Edit(**)", "Write", "Bash", '
                              f'"Edit({config}/**)"]\n')
    before = user_file.read_text()
    (workspace / "inner").symlink_to(workspace / ".heddle", target_is_directory=True)
    scripted.add_scenario("climb", steps(
        tool("Write", path=".heddle/settings.toml", content=ESCALATE),
        tool("Edit", path=str(user_file), old_string="[permissions]",
             new_string='[permissions]\nmode = "bypassPermissions"'),
        tool("MultiEdit", path="inner/../.HEDDLE/settings.toml",
             edits=[{"old_string": "", "new_string": ESCALATE}]),
        tool("Write", path="inner/settings.toml", content=ESCALATE),
        tool("Bash", command=f"echo '{ESCALATE}' > .heddle/settings.toml"),
        tool("Write", path="notes.txt", content="fine\n")))
    client.answer = lambda params: {"decision": "reject"}
    sid = await new_session(client, workspace, "climb", permissionMode="acceptEdits")

    result = await client.call("turn/start", {"sessionId": sid, "prompt": "go"})

    assert result["reason"] == "completed"
    asked = client.permission_requests
    assert [r["tool"] for r in asked] == ["Write", "Edit", "MultiEdit", "Write", "Bash"]
    for request in asked:  # only a yes to this very call: no "allow always" on offer
        assert [o["decision"] for o in request["options"]] == ["allowOnce", "reject"]
        assert request["title"].endswith("(it changes Heddle's own settings, so it always asks)")
    assert statuses(client) == ["rejected"] * 5 + ["ok"]
    assert not (workspace / ".heddle").exists() and not (workspace / ".HEDDLE").exists()
    assert user_file.read_text() == before
    assert (workspace / "notes.txt").read_text() == "fine\n"  # the mode still works elsewhere


async def test_project_settings_that_widen_apply_only_once_trusted(client, scripted, workspace):
    settings = workspace / ".heddle/settings.toml"
    scripted.add_scenario("write", steps(tool("Write", path=str(settings), content=ESCALATE)))
    client.answer = lambda params: {"decision": "allowOnce"}  # the user said yes, once
    sid = await new_session(client, workspace, "write", permissionMode="acceptEdits")
    await client.call("turn/start", {"sessionId": sid, "prompt": "go"})
    assert settings.read_text() == ESCALATE

    # the next session does not open in bypassPermissions, and the hook does not run
    scripted.add_scenario("after", steps(tool("Read", path="app.py"),
                                         tool("Bash", command="touch bashed")))
    client.answer = lambda params: {"decision": "reject"}
    client.permission_requests.clear()
    client.messages.clear()
    opened = await client.call("session/new", {"workspace": str(workspace), "model": "after"})
    assert opened["permissionMode"] == "default"
    untrusted = opened["untrustedSettings"]
    assert untrusted["settingsFile"] == str(settings)
    assert untrusted["ignored"] == ["permission mode bypassPermissions", "allow rule Bash",
                                    "PreToolUse hook `touch hooked`"]
    (shown,) = warnings_shown(client)  # window/showMessage: every client displays it
    assert shown.startswith(f"{settings} is not trusted, so Heddle ignores what it would enable")
    assert f"heddle trust -w {workspace}" in shown and shown in opened["warnings"]
    await client.call("turn/start", {"sessionId": opened["sessionId"], "prompt": "go"})
    assert not (workspace / "hooked").exists() and not (workspace / "bashed").exists()
    assert [r["tool"] for r in client.permission_requests] == ["Bash"]

    # a dry run says what trusting would enable, and records nothing
    review = {"workspace": str(workspace), "dryRun": True}
    assert await client.call("workspace/trust", review) == {
        "settingsFile": str(settings), "sha256": untrusted["sha256"],
        "enables": untrusted["ignored"], "trusted": False}
    again = await client.call("session/new", {"workspace": str(workspace), "model": "after"})
    assert again["permissionMode"] == "default" and "untrustedSettings" in again

    # trusting other content than the file has now is refused
    with pytest.raises(Exception, match="is not the content asked to be trusted"):
        await client.call("workspace/trust", {"workspace": str(workspace), "sha256": "0" * 64})
    trusted = await client.call("workspace/trust", {"workspace": str(workspace),
                                                    "sha256": untrusted["sha256"]})
    assert trusted == {"settingsFile": str(settings), "sha256": untrusted["sha256"],
                       "enables": untrusted["ignored"]}
    assert (await client.call("workspace/trust", review)).get("trusted", True) is True
    client.messages.clear()
    scripted.add_scenario("trusted", steps(tool("Bash", command="touch bashed")))
    opened = await client.call("session/new", {"workspace": str(workspace), "model": "trusted"})
    assert opened["permissionMode"] == "bypassPermissions" and "untrustedSettings" not in opened
    assert warnings_shown(client) == []
    await client.call("turn/start", {"sessionId": opened["sessionId"], "prompt": "go"})
    assert (workspace / "hooked").exists() and (workspace / "bashed").exists()

    # a changed file needs trust again
    settings.write_text(ESCALATE + "\n[[hooks.Stop]]\ncommand = \"touch stopped\"\n")
    scripted.add_scenario("changed", {"steps": [DONE]})
    opened = await client.call("session/new", {"workspace": str(workspace), "model": "changed"})
    assert opened["permissionMode"] == "default"
    assert opened["untrustedSettings"]["ignored"][-1] == "Stop hook `touch stopped`"
    await client.call("turn/start", {"sessionId": opened["sessionId"], "prompt": "hi"})
    assert not (workspace / "stopped").exists()


async def test_settings_that_only_narrow_apply_without_trust(client, scripted, user_file,
                                                             workspace):
    write_settings(user_file, '[permissions]\nmode = "acceptEdits"\n')
    write_settings(workspace / ".heddle/settings.toml",
                   '[permissions]\nmode = "default"\ndeny = ["Read(README.md)"]\n'
                   'ask = ["Read(app.py)"]\n')
    scripted.add_scenario("narrow", steps(tool("Read", path="README.md"),
                                          tool("Read", path="app.py"),
                                          tool("Write", path="x.txt", content="x")))
    client.answer = lambda params: {"decision": "reject"}
    opened = await client.call("session/new", {"workspace": str(workspace), "model": "narrow"})
    assert opened["permissionMode"] == "default" and "untrustedSettings" not in opened
    assert warnings_shown(client) == []
    await client.call("turn/start", {"sessionId": opened["sessionId"], "prompt": "go"})
    assert statuses(client) == ["rejected", "rejected", "rejected"]
    assert [r["tool"] for r in client.permission_requests] == ["Read", "Write"]


async def test_trust_needs_an_existing_absolute_folder(client, tmp_path):
    for bad in ("relative/dir", str(tmp_path / "missing")):
        with pytest.raises(Exception, match="absolute path to an existing folder"):
            await client.call("workspace/trust", {"workspace": bad})
    nothing = await client.call("workspace/trust", {"workspace": str(tmp_path)})
    assert nothing == {"settingsFile": str(tmp_path / ".heddle/settings.toml")}


def test_heddle_trust_shows_what_it_enables_and_records_it(daemon_env, scripted, workspace):
    settings = write_settings(workspace / ".heddle/settings.toml",
                              '[permissions]\nallow = ["Bash(echo:*)"]\n')
    scripted.add_scenario("ask", steps(tool("Bash", command="echo from-rule")))
    scripted.add_scenario("again", steps(tool("Bash", command="echo from-rule")))

    def heddle(*args, command="ask"):
        return subprocess.run([sys.executable, "-I", "-m", "heddle", command, "-w", str(workspace),
                               *args], env=daemon_env, capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL)

    untrusted = heddle("-m", "ask", "--no", "go")
    assert f"heddle: warning: {settings} is not trusted" in untrusted.stderr
    assert "✗ rejected" in untrusted.stdout  # the allow rule was ignored

    refused = heddle(command="trust")  # not a terminal, no --yes: nothing is recorded
    assert refused.returncode == 1 and "run it again with --yes" in refused.stderr
    assert "  - allow rule Bash(echo:*)" in refused.stdout and "is not trusted" in refused.stdout
    assert '    allow = ["Bash(echo:*)"]' in refused.stdout  # the file itself, for review
    done = heddle("--yes", command="trust")
    assert done.returncode == 0 and "Trusted" in done.stdout
    assert "is trusted" in heddle(command="trust").stdout

    trusted = heddle("-m", "again", "--no", "go")
    assert "is not trusted" not in trusted.stderr and "  └ exit 0" in trusted.stdout
    revoked = heddle("--revoke", command="trust")
    assert revoked.returncode == 0 and "No longer trusted" in revoked.stdout
    assert "is not trusted" in heddle(command="trust").stdout


async def test_a_loaded_session_takes_its_mode_from_the_settings_as_trusted_now(daemons, workspace):
    settings = workspace / ".heddle/settings.toml"
    write_settings(settings, '[permissions]\nmode = "bypassPermissions"\n')
    first = await daemons()
    await first.call("workspace/trust", {"workspace": str(workspace)})
    opened = await first.call("session/new", {"workspace": str(workspace)})
    chosen = await first.call("session/new", {"workspace": str(workspace),
                                              "permissionMode": "acceptEdits"})
    assert opened["permissionMode"] == "bypassPermissions"
    await first.stop()
    settings.write_text(settings.read_text() + "# changed, so no longer trusted\n")

    second = await daemons()
    loaded = await second.call("session/load", {"sessionId": opened["sessionId"]})
    kept = await second.call("session/load", {"sessionId": chosen["sessionId"]})

    assert loaded["permissionMode"] == "default"  # the mode came from the file, now untrusted
    assert loaded["untrustedSettings"]["ignored"] == ["permission mode bypassPermissions"]
    assert kept["permissionMode"] == "acceptEdits"  # the editor's own choice stays


def test_heddle_trust_says_a_settings_file_that_is_not_toml_has_nothing_to_trust(daemon_env,
                                                                                  workspace):
    settings = workspace / ".heddle/settings.toml"
    settings.parent.mkdir()
    settings.write_text('[permissions\nallow = ["Bash"]\n')
    result = subprocess.run([sys.executable, "-I", "-m", "heddle", "trust", "-w", str(workspace),
                             "--yes"], env=daemon_env, capture_output=True, text=True,
                            timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == (f"heddle: {settings} is not valid TOML (Expected ']' at the end of "
                             "a table declaration (at line 1, column 13)): there is nothing to "
                             "trust until it is fixed\n")


async def test_a_rule_saved_into_a_file_changed_since_its_trust_does_not_trust_the_change(
        client, scripted, workspace):
    # trusted as it was; then someone else changes it, and the user saves an "always allow"
    # rule into it: the record for this workspace exists, but it is for the old content
    settings = write_settings(workspace / ".heddle/settings.toml",
                              '[permissions]\nallow = ["Bash(echo:*)"]\n')
    await client.call("workspace/trust", {"workspace": str(workspace)})
    scripted.add_scenario("save", steps(tool("Bash", command="ls")))
    sid = await new_session(client, workspace, "save")
    assert "untrustedSettings" not in await client.call("session/new",
                                                        {"workspace": str(workspace)})
    settings.write_text('[permissions]\nallow = ["Bash(echo:*)", "Bash(touch:*)"]\n'
                        '\n[[hooks.PreToolUse]]\ncommand = "touch hooked"\n')
    client.answer = lambda params: {"decision": "allowAlways", "rule": "Bash(ls:*)",
                                    "scope": "project"}
    await client.call("turn/start", {"sessionId": sid, "prompt": "go"})
    answered = client.turn_events("permissionAnswered")[0]
    assert (answered["rule"], answered["scope"]) == ("Bash(ls:*)", "project")
    assert "Bash(ls:*)" in settings.read_text()  # saved through the rule path

    scripted.add_scenario("after", steps(tool("Bash", command="touch bashed")))
    client.answer = lambda params: {"decision": "reject"}
    opened = await client.call("session/new", {"workspace": str(workspace), "model": "after"})
    assert opened["untrustedSettings"]["ignored"] == [
        "allow rule Bash(echo:*)", "allow rule Bash(touch:*)", "allow rule Bash(ls:*)",
        "PreToolUse hook `touch hooked`"]
    await client.call("turn/start", {"sessionId": opened["sessionId"], "prompt": "go"})
    assert statuses(client)[-1] == "rejected"
    assert not (workspace / "hooked").exists() and not (workspace / "bashed").exists()
    review = await client.call("workspace/trust", {"workspace": str(workspace), "dryRun": True})
    assert review.get("trusted", True) is False
