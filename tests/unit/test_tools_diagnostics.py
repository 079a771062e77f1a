"""The editor's new errors and warnings after an edit of an open document: which are new, how
the model reads them, and when the daemon stops asking (a `Diagnostics` that answers from a
list here, with an `Editor` that keeps its own buffers)."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from heddle.core.diagnostics import (ERROR, HINT, INFORMATION, WARNING, Diagnostic,
                                     DiagnosticsReport, DiagnosticsUnavailable)
from heddle.core.tools import ToolContext
from heddle.sessions.setup import from_env
from heddle.settings import load_settings
from heddle.tools.diagnostics import DEFAULT_WAIT, LISTED, describe, moved_lines, new_problems
from heddle.tools.documents import EditorDocuments
from heddle.tools.edits import Write
from heddle.tools.files import Edit
from heddle.tools.reads import fingerprint, remember
from unit.test_tools_landing import Buffers

BEFORE = "import os\n\ndef f():\n    return x\n"


def d(line: int, message: str, severity: int = ERROR, source: str | None = None,
      code: str | None = None) -> Diagnostic:
    return Diagnostic(line, severity, message, source, code)


def test_lines_the_edit_left_alone_are_followed_to_where_they_went():
    after = "import os\nimport sys\n\ndef f():\n    return y\n"
    assert moved_lines(BEFORE, after) == {0: 0, 1: 2, 2: 3}  # line 3 was changed
    assert moved_lines("a\r\nb\rc", "z\na\r\nb\rc") == {0: 1, 1: 2, 2: 3}  # LSP's line ends


def test_problems_there_before_are_not_new_wherever_the_edit_moved_them():
    before = (d(3, "undefined name 'x'"), d(0, "'os' imported but unused", WARNING))
    after_text = "import os\nimport sys\n\ndef f():\n    return x\n    return foo\n"
    after = (d(0, "'os' imported but unused", WARNING), d(1, "'sys' imported but unused", WARNING),
             d(4, "undefined name 'x'"), d(5, "undefined name 'foo'"),
             d(5, "unreachable code", HINT), d(5, "consider a constant", INFORMATION))
    assert new_problems(before, after, BEFORE, after_text) == [
        d(1, "'sys' imported but unused", WARNING), d(5, "undefined name 'foo'")]


def test_a_second_problem_like_an_old_one_is_new_and_shown_where_it_is():
    before = (d(3, "undefined name 'x'"),)
    after_text = "import os\n\ndef f():\n    return x\n\nprint(x)\n"
    after = (d(5, "undefined name 'x'"), d(3, "undefined name 'x'"))
    assert new_problems(before, after, BEFORE, after_text) == [d(5, "undefined name 'x'")]
    # the old one moved further than the edit explains (the server saw it elsewhere): not new
    assert new_problems(before, (d(1, "undefined name 'x'"),), BEFORE, after_text) == []
    # a warning that became an error is new
    assert new_problems((d(0, "unused", WARNING),), (d(0, "unused", ERROR),), BEFORE, BEFORE) \
        == [d(0, "unused", ERROR)]


def test_the_model_reads_each_new_problem_with_its_line_and_where_it_came_from():
    text = describe([d(11, "undefined name 'foo'", source="Pyflakes"),
                     d(13, "multi\n   line\tmessage", source="pyright",
                       code="reportGeneralTypeIssues"),
                     d(20, "line too long", WARNING, code="E501")], "src/app.py")
    assert text == (
        "\n\nThe editor now reports 2 new errors and 1 new warning in src/app.py:\n"
        "  line 12: error: undefined name 'foo' (Pyflakes)\n"
        "  line 14: error: multi line message (pyright, reportGeneralTypeIssues)\n"
        "  line 21: warning: line too long (E501)\n"
        "They were not there before this edit. Fix the ones your change caused, unless your "
        "next edits resolve them.")
    assert describe([], "app.py") == ""


def test_at_most_ten_problems_are_listed_and_the_rest_counted():
    problems = [d(i, f"problem {i}", WARNING) for i in range(LISTED + 3)]
    text = describe(problems, "a.py")
    assert "13 new warnings in a.py:" in text
    assert "  line 10: warning: problem 9\n  … and 3 more\n" in text
    assert "problem 10" not in text
    long = describe([d(0, "x" * 1000)], "a.py")
    assert f"error: {'x' * 299}…\n" in long


class Answers:
    """A `Diagnostics` that answers from a list, the last answer again once the list is out."""

    def __init__(self, *answers: DiagnosticsReport | Exception):
        self.answers = list(answers)
        self.asked: list[tuple[str, float]] = []

    async def report(self, uri: str, timeout: float) -> DiagnosticsReport:
        self.asked.append((uri, timeout))
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


def report(*diagnostics: Diagnostic, generation: int | None = None) -> DiagnosticsReport:
    return DiagnosticsReport(tuple(diagnostics), generation)


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    path = tmp_path / "a.py"
    path.write_text(BEFORE)
    docs = EditorDocuments()
    docs.open(path.resolve(), BEFORE, 1)
    editor = Buffers(docs)
    docs.editor_source = lambda: editor
    context = ToolContext(tmp_path.resolve(), documents=docs, diagnostics_wait=30)
    remember(context, path.resolve(), fingerprint(BEFORE), "editor", "read")  # the agent read it
    return context


def edit(ctx: ToolContext, **raw):
    raw = {"path": "a.py", "old_string": "return x", "new_string": "return foo", **raw}
    return Edit().run(Edit().normalise(msgspec.convert(raw, Edit.input_type), ctx), ctx)


async def test_an_edit_waits_until_the_diagnostics_are_fresh_and_settled(ctx):
    old = d(0, "'os' imported but unused", WARNING)
    answers = Answers(report(old, generation=4),  # the baseline
                      report(old, generation=4),  # not checked yet
                      report(old, generation=5),  # checked: the same (fresh by its generation)
                      report(old, generation=6, ),  # checked again
                      report(old, d(3, "undefined name 'foo'"), generation=7),
                      report(old, d(3, "undefined name 'foo'"), generation=7))  # settled
    ctx.documents.diagnostics_source = lambda: answers
    out = await edit(ctx)
    assert out.content == (
        "Edited a.py (1 replacement).\n\n"
        "The editor now reports 1 new error in a.py:\n"
        "  line 4: error: undefined name 'foo'\n"
        "They were not there before this edit. Fix the ones your change caused, unless your "
        "next edits resolve them.")
    uri = (ctx.workspace / "a.py").as_uri()
    assert answers.asked == [(uri, 1.0)] * 6


async def test_without_a_generation_fresh_means_different(ctx):
    answers = Answers(report(), report(), report(d(3, "undefined name 'foo'")),
                      report(d(3, "undefined name 'foo'")))
    ctx.documents.diagnostics_source = lambda: answers
    out = await edit(ctx)
    assert "1 new error in a.py" in out.content and len(answers.asked) == 4


async def test_an_edit_that_changes_nothing_waits_out_the_bound_and_says_nothing(ctx):
    ctx.diagnostics_wait = 0.4
    answers = Answers(report(d(0, "unused", WARNING), generation=1))
    ctx.documents.diagnostics_source = lambda: answers
    out = await edit(ctx)
    assert out.content == "Edited a.py (1 replacement)."
    assert answers.asked[0][1] == 0.4  # the baseline waits no longer than the bound
    assert len(answers.asked) >= 2  # before; then until the bound (at 0.3 s and 0.4 s)


@pytest.mark.parametrize("failing", [0, 1, 3])
async def test_an_editor_that_gives_no_diagnostics_leaves_the_result_as_it_was(ctx, failing):
    answers = Answers(*[report(generation=i) for i in range(failing)],
                      DiagnosticsUnavailable("no answer within 1 s"),
                      report(d(3, "undefined name 'foo'"), generation=9))
    ctx.documents.diagnostics_source = lambda: answers
    out = await edit(ctx)
    assert out.content == "Edited a.py (1 replacement)."
    assert len(answers.asked) == failing + 1  # no question after the one that failed
    assert ctx.documents.text(ctx.workspace / "a.py") == BEFORE.replace("return x", "return foo")


async def test_no_question_when_the_setting_is_zero_or_the_file_is_not_open(ctx):
    answers = Answers(report(d(3, "undefined name 'foo'")))
    ctx.documents.diagnostics_source = lambda: answers
    ctx.diagnostics_wait = 0
    assert (await edit(ctx)).content == "Edited a.py (1 replacement)."
    ctx.diagnostics_wait = 30
    out = await Write().run(Write().normalise(msgspec.convert(
        {"path": "b.py", "content": "x = (\n"}, Write.input_type), ctx), ctx)
    assert out.content == "Created b.py (1 line)." and answers.asked == []


def test_the_wait_comes_from_the_settings_files_else_the_environment(tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
    user = tmp_path / "config" / "heddle" / "settings.toml"
    user.parent.mkdir(parents=True)
    user.write_text("[editor]\ndiagnostics_wait = 5\n")
    ws = tmp_path / "ws"
    (ws / ".heddle").mkdir(parents=True)
    assert load_settings(ws, env).settings.editor.diagnostics_wait == 5
    # the project's applies untrusted: it can only make edits wait for the editor, or not
    (ws / ".heddle" / "settings.toml").write_text(
        "[editor]\ndiagnostics_wait = 0\n[permissions]\nallow = ['Bash']\n")
    loaded = load_settings(ws, env)
    assert loaded.untrusted is not None and loaded.settings.editor.diagnostics_wait == 0
    (ws / ".heddle" / "settings.toml").write_text("[editor]\ndiagnostics_wait = -1\n")
    loaded = load_settings(ws, env)
    assert loaded.settings.editor.diagnostics_wait == 5
    assert any("editor.diagnostics_wait" in w for w in loaded.warnings)

    base = {"ANTHROPIC_API_KEY": "test"}
    assert from_env(base).deps.diagnostics_wait == DEFAULT_WAIT == 2
    assert from_env(base | {"HEDDLE_DIAGNOSTICS_WAIT": "0.5"}).deps.diagnostics_wait == 0.5
    with pytest.raises(ValueError, match="HEDDLE_DIAGNOSTICS_WAIT must be a number"):
        from_env(base | {"HEDDLE_DIAGNOSTICS_WAIT": "soon"})
