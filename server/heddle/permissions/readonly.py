"""Which Bash command lines only read: the commands plan mode lets run.

A line is read-only when the bash parser (`heddle.commands.analyse`) finds nothing it cannot
vouch for in it (no redirection to or from a file, no here-document, no assignment, …) and
every simple command it would run — after `;`, `&&`, `|`, inside `$(…)` — is on the list
below with arguments the list allows. Commands whose arguments can make them write (`find
-delete`, `sort -o`, `git branch NAME`) must have plain, literal arguments: an expansion or a
glob could turn into such an option when the line runs (`find . $(echo -delete)`, a file
named `-delete`).
"""

from __future__ import annotations

import re
from typing import Callable

from heddle.commands import analyse

ANY_ARGUMENTS = frozenset({
    "ls", "cat", "head", "tail", "wc", "grep", "egrep", "fgrep", "pwd", "echo", "printf",
    "true", "false", "stat", "du", "df", "which", "type", "basename", "dirname", "realpath",
    "readlink", "diff", "cmp", "comm", "cut", "tr", "nl", "od", "hexdump", "md5sum",
    "sha1sum", "sha256sum", "sha512sum", "whoami", "id", "uname", "ps", "cd", "jq", "column",
    "fold", "tac", "rev", "expand", "test", "[", "file",
})
"""No argument makes these write a file or run another command."""

_LITERAL = re.compile(r"[A-Za-z0-9_./:=@%+,^~-]+|'[^']*'|\"[^\"$`\\!]*\"")
"""A word bash passes on unchanged (apart from its quotes): no expansion, no glob."""


def _none_of(*bad: str) -> Callable[[tuple[str, ...]], str | None]:
    """Any arguments but these options: `--long` (or `--long=value`), and a `-x` alone or
    anywhere in a group of short options (`-uo`)."""
    longs = {b for b in bad if b.startswith("--")}
    shorts = {b[1] for b in bad if not b.startswith("--")}

    def check(args: tuple[str, ...]) -> str | None:
        for arg in args:
            if arg.split("=", 1)[0] in longs or (
                    arg.startswith("-") and not arg.startswith("--") and shorts & set(arg[1:])):
                return f"its option {arg} can write files or run commands"
        return None
    return check


_FIND_BAD = ("-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0",
             "-fprintf", "-fls")


def _find(args: tuple[str, ...]) -> str | None:
    bad = next((a for a in args if a in _FIND_BAD), None)
    return f"find {bad} can change files or run commands" if bad else None


GIT_READERS = frozenset({
    "log", "status", "diff", "show", "blame", "ls-files", "ls-tree", "rev-parse", "rev-list",
    "describe", "shortlog", "cat-file", "merge-base", "grep", "whatchanged", "show-ref",
    "name-rev", "count-objects", "annotate",
})
_GIT_LISTERS = {  # subcommands that list with these options, and change things otherwise
    "branch": {"-a", "-r", "-l", "--list", "-v", "-vv", "--all", "--remotes", "--show-current",
               "--merged", "--no-merged", "--contains", "--sort", "--format", "--no-color",
               "--color"},
    "tag": {"-l", "--list", "-n", "--sort", "--contains", "--merged", "--points-at",
            "--format"},
    "remote": {"-v", "--verbose", "show", "get-url"},
    "stash": {"list", "show"},
    "reflog": {"show"},
    "config": {"--get", "--get-all", "--get-regexp", "--list", "-l", "--show-origin",
               "--global", "--local", "--show-scope"},
    "worktree": {"list"},
}
_GIT_BAD = {"--output", "--ext-diff", "--textconv", "-o", "--open-files-in-pager", "-O"}


def _git(args: tuple[str, ...]) -> str | None:
    rest = list(args)
    while rest and rest[0] in ("-C", "--no-pager", "-P", "--no-optional-locks"):
        rest = rest[2:] if rest[0] == "-C" else rest[1:]
    if not rest:
        return None
    sub, options = rest[0], rest[1:]
    if sub.startswith("-"):
        return f"git {sub} can change what git runs"
    if sub in GIT_READERS:
        bad = next((o for o in options if o.split("=", 1)[0] in _GIT_BAD), None)
        return f"git {sub} {bad} can write files or run commands" if bad else None
    allowed = _GIT_LISTERS.get(sub)
    if allowed is None:
        return f"git {sub} is not one of the git commands that only read"
    if sub == "config":  # a key (and a value) after --get reads; without one, it writes
        if not any(o.split("=", 1)[0] in allowed - {"--global", "--local", "--show-origin",
                                                    "--show-scope"} for o in options):
            return "git config without --get or --list changes the configuration"
        return None
    if sub in ("branch", "tag"):
        stray = next((o for o in options if not o.startswith("-")
                      and o.split("=", 1)[0] not in allowed), None)
        if stray is not None and not any(o in ("-l", "--list") for o in options):
            return f"git {sub} {stray} creates a {sub}"
        bad = next((o for o in options if o.startswith("-")
                    and o.split("=", 1)[0] not in allowed), None)
        return f"git {sub} {bad} changes things" if bad else None
    first = options[0] if options else None
    if first is None and sub == "stash":
        return "git stash alone stashes the changes away"
    if first is not None and first not in allowed:
        return f"git {sub} {first} changes things"
    return None


CHECKED: dict[str, Callable[[tuple[str, ...]], str | None]] = {
    "find": _find,
    "git": _git,
    "rg": _none_of("--pre", "--pre-glob", "--search-zip", "-z"),
    "sort": _none_of("-o", "--output", "--compress-program"),
    "tree": _none_of("-o"),
    "date": _none_of("-s", "--set"),
}
"""Read-only with some arguments only: each says why not, or None."""

NAMES = sorted(ANY_ARGUMENTS | CHECKED.keys())


def refusal(command: str) -> str | None:
    """Why `command` is not a read-only command line; None when it is one."""
    line = analyse(command)
    if line.opaque is not None:
        return f"it has {line.opaque}"
    if not line.commands:
        return "it runs no command"
    for cmd in line.commands:
        name, args = cmd.plain[0], cmd.plain[1:]
        if name in ANY_ARGUMENTS:
            continue
        check = CHECKED.get(name)
        if check is None:
            return f"{name} is not on the list of read-only commands"
        loose = next((w for w in cmd.words[1:] if not _LITERAL.fullmatch(w)), None)
        if loose is not None:
            return (f"the argument {loose} of {name} could expand to anything: give {name} "
                    "plain words")
        if why := check(args):
            return why
    return None
