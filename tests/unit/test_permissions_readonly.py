"""Which Bash command lines plan mode lets run: read-only ones, read with the bash parser."""

from __future__ import annotations

import pytest

from heddle.permissions.readonly import refusal

READ_ONLY = [
    "ls -la", "cat app.py | head -5", "git log --oneline -5", "git status && git diff HEAD~1",
    "git show HEAD:app.py", "git -C sub log", "git branch", "git branch -a", "git tag -l",
    "git remote -v", "git stash list", "git config --get user.name", "grep -rn foo . | wc -l",
    "rg foo src", "find . -name '*.py' -type f", "cat app.py 2>/dev/null", "cd src && ls",
    "sort app.py", "echo $(git rev-parse HEAD)",
    "wc -l *.py", "tree -L 2",
]

REFUSED = {
    "echo x > f": "it has a redirection to or from a file (> f)",
    "ls; rm x": "rm is not on the list of read-only commands",
    "cat < app.py": "it has a redirection to or from a file (< app.py)",
    "ls `rm x`": "it has backticks",
    "FOO=1 ls": "FOO=1 is not on the list of read-only commands",
    "/bin/rm x": "/bin/rm is not on the list of read-only commands",
    "cat $(rm x)": "rm is not on the list of read-only commands",
    "find . -delete": "find -delete can change files or run commands",
    "find . -exec touch x +": "find -exec can change files or run commands",
    "find . $(echo -delete)": "the argument $(echo -delete) of find could expand to anything: "
                              "give find plain words",
    "find . *": "the argument * of find could expand to anything: give find plain words",
    "sort -o out app.py": "its option -o can write files or run commands",
    "sort -uo out app.py": "its option -uo can write files or run commands",
    "rg --pre ./x foo": "its option --pre can write files or run commands",
    "git branch topic": "git branch topic creates a branch",
    "git branch -D": "git branch -D changes things",
    "git tag v1": "git tag v1 creates a tag",
    "git stash": "git stash alone stashes the changes away",
    "git remote add origin x": "git remote add changes things",
    "git config user.name me": "git config without --get or --list changes the configuration",
    "git -c core.pager=sh log": "git -c can change what git runs",
    "git log --output=f": "git log --output=f can write files or run commands",
    "git diff --ext-diff": "git diff --ext-diff can write files or run commands",
    "git commit -m x": "git commit is not one of the git commands that only read",
    "python3 -c 'print(1)'": "python3 is not on the list of read-only commands",
    "cat <<EOF\nx\nEOF": "it has a here-document",
    "": "it runs no command",
}


@pytest.mark.parametrize("line", READ_ONLY)
def test_read_only_lines(line):
    assert refusal(line) is None


@pytest.mark.parametrize("line,why", REFUSED.items())
def test_refused_lines_say_why(line, why):
    assert refusal(line) == why
