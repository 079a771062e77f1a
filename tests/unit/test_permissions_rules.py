"""Rule syntax and matching, reading command lines, and the order of a decision."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from heddle.core.tools import ToolContext
from heddle.permissions.policy import Allow, Ask, Deny, PermissionPolicy
from heddle.commands import analyse
from heddle.rules import (Rule, RuleError, check_rule, command_matches, path_matches,
                          rule_matches)
from heddle.tools.registry import builtin_tools

TOOLS = builtin_tools()
WS = Path("/ws")


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(tmp_path.resolve())


def call(ctx, tool: str, **raw):
    t = TOOLS[tool]
    return t, t.normalise(msgspec.convert(raw, t.input_type), ctx)


def test_rule_syntax():
    assert check_rule(" Bash(git status:*) ") == "Bash(git status:*)"
    assert check_rule("Edit(*)") == check_rule("Edit()") == check_rule("Edit") == "Edit"
    for bad in ("", "Bash(", "(x)", "Bash git", "9Tool"):
        with pytest.raises(RuleError, match="is not a rule"):
            check_rule(bad)


@pytest.mark.parametrize("pattern,path,expected", [
    ("src/**", "/ws/src", True),
    ("src/**", "/ws/src/a/b.py", True),
    ("src/**", "/ws/srcx/a.py", False),
    ("src/*.py", "/ws/src/a.py", True),
    ("src/*.py", "/ws/src/sub/a.py", False),
    ("**/*.py", "/ws/a.py", True),
    ("**/test_*.py", "/ws/tests/unit/test_x.py", True),
    ("app.py", "/ws/app.py", True),
    ("app.py", "/ws/sub/app.py", False),
    ("/etc/**", "/etc/passwd", True),
    ("a?c[0-9].txt", "/ws/abc1.txt", True),
    ("a[!b].txt", "/ws/ab.txt", False),
])
def test_path_patterns(pattern, path, expected):
    assert path_matches(pattern, Path(path), WS) is expected


@pytest.mark.parametrize("command,parts,opaque", [
    ("git status", [("git", "status")], False),
    ("git add . && git commit -m 'a; b'", [("git", "add", "."), ("git", "commit", "-m", "'a; b'")],
     False),
    ("pytest -x 2>&1 | tail -5", [("pytest", "-x"), ("tail", "-5")], False),
    ("make >/dev/null 2>&1; echo done", [("make",), ("echo", "done")], False),
    ("sleep 1 & wait", [("sleep", "1"), ("wait",)], False),
    ("echo $(cat ~/.ssh/id_rsa)", [("echo", "$(cat ~/.ssh/id_rsa)"), ("cat", "~/.ssh/id_rsa")],
     False),  # the substituted command is a command of the line: a rule must cover it too
    ("echo `id`", [("echo", "`id`"), ("id",)], True),
    ("echo '$(not run)'", [("echo", "'$(not run)'")], False),
    ("ls > listing.txt", [("ls",)], True),
    ("diff <(ls a) <(ls b)", [("diff", "<(ls a)", "<(ls b)"), ("ls", "a"), ("ls", "b")], False),
    ("cat <<EOF\nx\nEOF", [("cat",)], True),  # the here-doc's body is no command
])
def test_analyse(command, parts, opaque):
    line = analyse(command)
    assert [c.words for c in line.commands] == parts
    assert (line.opaque is not None) is opaque, line.opaque


def test_bash_prefix_rules_cover_every_part_for_allow_any_part_for_deny():
    assert command_matches("git status:*", "git status --short", any_part=False)
    assert command_matches("git status:*", "git status", any_part=False)
    assert not command_matches("git status:*", "git statusx", any_part=False)
    assert not command_matches("git status:*", "git status; rm -rf ~", any_part=False)
    assert not command_matches("echo:*", "echo $(rm -rf ~)", any_part=False)
    assert not command_matches("ls:*", "ls > out.txt", any_part=False)
    assert command_matches("git:*", "git add . && git commit -m x", any_part=False)
    assert command_matches("rm:*", "cd build && rm -rf out", any_part=True)
    assert command_matches("make test", "make test", any_part=False)
    assert not command_matches("make test", "make test && curl x", any_part=False)


def test_rule_families(ctx):
    write, inp = call(ctx, "Write", path="src/a.py", content="")
    assert rule_matches("Edit(src/**)", write, inp, ctx)
    assert rule_matches("Write", write, inp, ctx)
    assert not rule_matches("MultiEdit", write, inp, ctx)
    glob, ginp = call(ctx, "Glob", pattern="*", path=".")
    assert rule_matches("Read", glob, ginp, ctx)
    assert not rule_matches("Edit", glob, ginp, ctx)
    todo, tinp = call(ctx, "TodoWrite", todos=[])
    assert rule_matches("TodoWrite", todo, tinp, ctx)
    assert not rule_matches("TodoWrite(x)", todo, tinp, ctx)  # no path to match


def test_decision_order(ctx):
    bash, git = call(ctx, "Bash", command="git push origin main")
    edit, src = call(ctx, "Edit", path="src/a.py", old_string="", new_string="x")
    read, readme = call(ctx, "Read", path="README.md")
    both = PermissionPolicy(allow=["Bash(git:*)"], deny=["Bash(git push:*)"])
    assert isinstance(both.decide(bash, git, ctx), Deny)  # deny beats allow
    deny_bypass = PermissionPolicy(mode="bypassPermissions", deny=["Edit(src/**)"])
    assert isinstance(deny_bypass.decide(edit, src, ctx), Deny)  # ...and every mode
    ask = PermissionPolicy(mode="bypassPermissions", allow=["Read"], ask=["Read(README.md)"])
    assert ask.decide(read, readme, ctx) == Ask("Read(README.md)")  # ask beats allow and mode
    plan = PermissionPolicy(mode="plan", allow=["Bash"])
    assert "plan mode" in plan.decide(bash, git, ctx).message  # plan beats allow rules
    assert isinstance(plan.decide(read, readme, ctx), Allow)
    allowed = PermissionPolicy(allow=["Edit(src/**)"]).decide(edit, src, ctx)
    assert allowed == Allow("rule Edit(src/**) (a session rule)")


def test_modes(ctx):
    bash, cmd = call(ctx, "Bash", command="touch x")
    edit, src = call(ctx, "Edit", path="a.py", old_string="", new_string="x")
    read, rd = call(ctx, "Read", path="a.py")
    todo, plan_inp = call(ctx, "TodoWrite", todos=[])
    expected = {
        "default": (Ask, Ask, Allow, Allow),
        "acceptEdits": (Ask, Allow, Allow, Allow),
        "plan": (Deny, Deny, Allow, Allow),
        "bypassPermissions": (Allow, Allow, Allow, Allow),
    }
    for mode, kinds in expected.items():
        policy = PermissionPolicy(mode=mode)
        got = tuple(type(policy.decide(t, i, ctx)) for t, i in
                    ((bash, cmd), (edit, src), (read, rd), (todo, plan_inp)))
        assert got == kinds, mode


def test_hook_verdicts_in_the_decision(ctx):
    bash, cmd = call(ctx, "Bash", command="ls")
    policy = PermissionPolicy(deny=["Bash(rm:*)"])
    assert policy.decide(bash, cmd, ctx, hook="allow", hook_reason="safe") == Allow(
        "PreToolUse hook: safe")
    read, rd = call(ctx, "Read", path="a.py")
    assert isinstance(policy.decide(read, rd, ctx, hook="ask"), Ask)
    _, rm = call(ctx, "Bash", command="rm -rf x")
    assert isinstance(policy.decide(bash, rm, ctx, hook="allow"), Deny)  # deny rules still win


def test_policy_rules_and_scopes(ctx):
    policy = PermissionPolicy(allow=["Bash(ls:*)"], rules=[Rule("deny", "Read(.env)", "user")])
    assert policy.allow == ["Bash(ls:*)"] and policy.deny == ["Read(.env)"]
    policy.add(Rule("ask", "Bash(*)"))
    assert Rule("ask", "Bash") in policy.rules
    assert policy.revoke("Bash(*)") == [Rule("ask", "Bash")]
    assert policy.revoke("Bash(ls:*)", kind="deny") == []
    with pytest.raises(RuleError):
        policy.add(Rule("allow", "Bash("))
