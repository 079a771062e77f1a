"""The executor's pipeline for one call: validate → normalise → hooks → rules → mode → ask →
run → hooks, driven directly with a real task group and a scripted asker."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import anyio
import pytest

from heddle.core.events import PermissionAnswered, ToolCallFinished
from heddle.core.messages import ToolUseBlock
from heddle.core.tools import ToolContext
from heddle.loop.executor import ToolExecutor
from heddle.permissions.policy import PermissionAnswer, PermissionPolicy, PermissionPrompt
from heddle.settings import HookCommand, HookSettings, SettingsFiles
from heddle.tools.registry import builtin_tools


class Asker:
    """Answers prompts from a list and remembers them."""

    def __init__(self, *answers: PermissionAnswer):
        self.answers = list(answers)
        self.prompts: list[PermissionPrompt] = []

    async def __call__(self, prompt: PermissionPrompt) -> PermissionAnswer:
        self.prompts.append(prompt)
        return self.answers.pop(0)


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    ws = (tmp_path / "ws").resolve()
    ws.mkdir()
    (ws / "a.txt").write_text("alpha\n")
    return ToolContext(ws, emit=[].append)


async def execute(ctx: ToolContext, policy: PermissionPolicy, asker, *calls: tuple[str, dict],
                  input_error: str | None = None):
    events = []
    ctx.emit = events.append
    async with anyio.create_task_group() as tg:
        ex = ToolExecutor(builtin_tools(), ctx, policy, asker, tg)
        for i, (name, inp) in enumerate(calls):
            ex.add(ToolUseBlock(f"t{i}", name, inp), input_error)
        ex.finish_intake()
        await ex.wait()
    return ex.results("missing"), events


async def test_invalid_input_is_an_error_result_naming_the_field(ctx):
    results, events = await execute(ctx, PermissionPolicy(), Asker(),
                                    ("Read", {"path": 3}), ("Edit", {"path": "a.txt"}),
                                    ("Nope", {}), ("Glob", {"pattern": "*", "extra": 1}))
    assert [r.is_error for r in results] == [True, True, True, False]
    assert results[0].content == ("Invalid input for Read: Expected `str`, got `int` - at "
                                  "`$.path` (path: File to read, absolute or relative to the "
                                  "workspace)")
    assert "missing required field `old_string`" in results[1].content
    assert results[2].content.startswith("There is no tool named Nope. Tools: Bash, Edit, Glob")
    assert results[3].content.endswith("\n\n(Ignored unknown field `extra`: Glob takes pattern, "
                                       "path (or file_path).)")
    assert [e.summary for e in events if isinstance(e, ToolCallFinished)][0] == (
        "invalid input: Expected `str`, got `int` - at `$.path`")
    (bad_json,), _ = await execute(ctx, PermissionPolicy(), Asker(), ("Read", {}),
                                   input_error="Expecting value")
    assert bad_json.content == "The input for Read was not valid JSON: Expecting value"


async def test_rejection_messages_reach_the_model(ctx):
    asker = Asker(PermissionAnswer("reject", message="use Edit instead"),
                  PermissionAnswer("reject", reason="no answer within 5 s"),
                  PermissionAnswer("reject"))
    await execute(ctx, PermissionPolicy(), asker, ("Read", {"path": "a.txt"}))
    results, events = await execute(ctx, PermissionPolicy(), asker,
                                    *[("Write", {"path": "a.txt", "content": "x"})] * 3)
    assert [r.content for r in results] == [
        "The user rejected this Write call and said: use Edit instead",
        "This Write call did not run: no answer within 5 s. Do not retry it; tell the user what "
        "you wanted to do instead.",
        "The user rejected this Write call. Do not retry it; ask the user how to proceed if you "
        "need it."]
    assert (ctx.workspace / "a.txt").read_text() == "alpha\n"
    assert asker.prompts[0].rule == "Edit(a.txt)" and asker.prompts[0].preview.diff


async def test_allow_always_saves_the_edited_rule_where_asked(ctx, tmp_path):
    files = SettingsFiles(tmp_path / "user.toml", ctx.workspace / ".heddle/settings.toml")
    policy = PermissionPolicy(files=files)
    asker = Asker(PermissionAnswer("allowAlways", rule="Bash(echo:*)", scope="project"))
    results, events = await execute(ctx, policy, asker, ("Bash", {"command": "echo one"}),
                                    ("Bash", {"command": "echo two"}))
    assert [r.content for r in results] == ["Exit code 0\none\n", "Exit code 0\ntwo\n"]
    assert len(asker.prompts) == 1 and asker.prompts[0].rule == "Bash(echo one:*)"
    assert tomllib.loads(files.project.read_text()) == {"permissions": {"allow": ["Bash(echo:*)"]}}
    answered = [e for e in events if isinstance(e, PermissionAnswered)]
    assert answered == [PermissionAnswered("t0", "allowAlways", "Bash(echo:*)", None, "project")]


async def test_allow_always_with_a_bad_rule_or_no_file_says_so(ctx):
    asker = Asker(PermissionAnswer("allowAlways", rule="Bash(echo"),
                  PermissionAnswer("allowAlways", scope="user"))
    policy = PermissionPolicy()
    results, events = await execute(ctx, policy, asker, ("Bash", {"command": "echo 1"}),
                                    ("Bash", {"command": "true"}))
    assert not any(r.is_error for r in results)
    first, second = [e for e in events if isinstance(e, PermissionAnswered)]
    assert first.rule is None and "the rule was not saved" in first.reason
    assert (second.rule, second.scope) == ("Bash(true:*)", "session")
    assert "kept for this session only" in second.reason
    assert policy.allow == ["Bash(true:*)"]


async def test_hooks_deny_modify_and_comment(ctx, tmp_path):
    deny_rm = HookCommand("grep -q '\"rm ' && { echo 'no deleting' >&2; exit 2; } || true",
                          matcher="Bash")
    redirect = HookCommand(f"{sys.executable} -c \"import json,sys; e=json.load(sys.stdin); "
                           "i=e['tool_input']; i['path']=i['path'].replace('a.txt','b.txt'); "
                           "print(json.dumps({'updatedInput': i, 'decision': 'allow'}))\"",
                           matcher="Write")
    comment = HookCommand("echo '{\"additionalContext\": \"remember the changelog\"}'",
                          matcher="Edit|Write")
    policy = PermissionPolicy(hooks=HookSettings(pre_tool_use=[deny_rm, redirect],
                                                 post_tool_use=[comment]))
    asker = Asker()  # nothing may ask: the hook allows the Write, and denies the rm
    results, events = await execute(ctx, policy, asker,
                                    ("Bash", {"command": "rm -rf a.txt"}),
                                    ("Write", {"path": "a.txt", "content": "beta\n"}))
    assert results[0].content == "A hook blocked this Bash call: no deleting"
    assert (ctx.workspace / "a.txt").read_text() == "alpha\n"
    assert (ctx.workspace / "b.txt").read_text() == "beta\n"
    assert results[1].content.endswith("\n\n[PostToolUse hook] remember the changelog")
    assert not results[1].is_error
    finished = [e.status for e in events if isinstance(e, ToolCallFinished)]
    assert finished == ["rejected", "ok"]


async def test_a_hook_cannot_smuggle_bad_input_or_paths(ctx):
    to_etc = HookCommand("echo '{\"updatedInput\": {\"path\": \"/etc/passwd\"}}'")
    to_nothing = HookCommand("echo '{\"updatedInput\": {\"file\": \"x\"}}'")
    for hook, expected in ((to_etc, "/etc/passwd is outside the workspace"),
                           (to_nothing, "Invalid input for Read (as a PreToolUse hook changed "
                                        "it): Object missing required field `path`")):
        policy = PermissionPolicy(hooks=HookSettings(pre_tool_use=[hook]))
        (result,), _ = await execute(ctx, policy, Asker(), ("Read", {"path": "a.txt"}))
        assert result.is_error and result.content.startswith(expected)
    assert result.content.endswith("(Ignored unknown field `file`: Read takes path (or "
                                   "file_path), offset, limit.)")


async def test_plan_mode_refuses_with_a_message_for_the_model(ctx):
    results, events = await execute(ctx, PermissionPolicy(mode="plan"), Asker(),
                                    ("Edit", {"path": "a.txt", "old_string": "alpha",
                                              "new_string": "beta"}),
                                    ("Read", {"path": "a.txt"}), ("TodoWrite", {"todos": []}))
    assert results[0].content.startswith("Edit is not available in plan mode")
    assert [r.is_error for r in results] == [True, False, False]
