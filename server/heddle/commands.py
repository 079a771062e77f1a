"""What a shell command line would run, read with a real bash parser (tree-sitter-bash).

`analyse` finds every simple command of a line, wherever bash would run it — after `;`, `&&`,
`||`, `|`, `&` or a newline, inside `$(…)`, `<(…)`, `( … )`, `{ …; }` and if/while/case
bodies — and says why, if anything in the line does what no command rule can vouch for. An
allow rule may allow a line only when that reason is None and it (or another allow rule)
covers each command.

Not vouched for: a line that does not parse; a redirection that reads or writes a file (file
descriptors and /dev/null are fine); here-docs and here-strings; backticks (how escapes nest in
them is where parsers and bash disagree); arithmetic, `[[ … ]]`; variable assignments on their
own, `for` loops and function definitions (they change what later commands do: `PATH=…`,
`git() { …; }`); expansions that assign, transform or index (`${x:=v}`, `${x@P}`, `${a[i]}`,
`${x:1}`, `${!x}`); and any construct this module does not know. Commands are compared by their
words as written, so `FOO=1 git status` starts with `FOO=1`, not `git`.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterator

RUNNERS = frozenset({
    "env", "exec", "command", "builtin", "nohup", "nice", "ionice", "time", "timeout", "sudo",
    "doas", "su", "xargs", "stdbuf", "setsid", "chroot", "watch", "strace", "ltrace", "flock",
    "taskset", "chrt", "unbuffer", "parallel", "eval", "source", ".", "coproc",
})
"""Commands that run (or read) other commands: a prefix rule is never offered for them."""
SHELLS = frozenset({"bash", "sh", "dash", "zsh", "ksh", "mksh", "fish", "busybox"})

# Node types that are only structure or inert words; their children are checked on their own.
_PLAIN_NODES = frozenset({
    "program", "list", "pipeline", "subshell", "negated_command", "comment",
    "redirected_statement", "if_statement", "elif_clause", "else_clause", "while_statement",
    "do_group", "case_statement", "case_item", "process_substitution", "command_name", "word",
    "string", "string_content", "raw_string", "ansi_c_string", "translated_string",
    "concatenation", "number", "simple_expansion", "variable_name", "special_variable_name",
    "brace_expression", "extglob_pattern", "regex", "file_descriptor",
})
_COMMANDS = frozenset({"command", "declaration_command", "unset_command"})
_REDIRECTS = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
_OPAQUE = {
    "heredoc_redirect": "a here-document", "herestring_redirect": "a here-string",
    "function_definition": "a function definition", "for_statement": "a for loop",
    "c_style_for_statement": "a for loop", "test_command": "a [[ … ]] test",
    "arithmetic_expansion": "arithmetic", "subscript": "an array index",
    "variable_assignments": "variable assignments",
}
_EXPANSION_OPS = frozenset({"${", "}", "#", "##", "%", "%%", "/", "//", "/#", "/%", ",", ",,",
                            "^", "^^", ":-", "-", ":?", "?", ":+", "+"})
_NULL_OPS = frozenset({">", ">>", "&>", "&>>"})
_LITERAL_LEAVES = frozenset({"raw_string", "ansi_c_string", "comment", "heredoc_body"})
_UNREAD = re.compile(r"`|\$[({\[]|[<>]\(")
"""In a word the parser read as plain text, what bash may still expand: `${x-`rm`}`."""
_FALSE_BLANKS = re.compile(r"[\v\f\r]")
"""Blanks to the parser, not to bash: in `a\\v#; rm x` bash reads no comment."""
_CONTINUATION = re.compile(rb"(?<!\\)(?:\\\\)*\\\n")
_QUOTED_LEAVES = _LITERAL_LEAVES | {"string_content"}
_ESCAPE = re.compile(r"\\(.)", re.S)
_DEPTH = 3
"""How deep deny rules look into `bash -c '…'` and `eval '…'`."""


@dataclass(frozen=True)
class Command:
    words: tuple[str, ...]
    """Each word as written, assignments before the command name included."""
    plain: tuple[str, ...]
    """The same words with literal quoting and backslashes removed (`'rm'` → `rm`)."""


@dataclass(frozen=True)
class Line:
    commands: tuple[Command, ...]
    """Every simple command of the line, in source order (nested ones after their parent)."""
    opaque: str | None
    """Why no command rule can vouch for the line; None: running it runs only `commands`."""


_lock = threading.Lock()


@lru_cache(maxsize=1)
def _parser() -> Any:
    # imported at the first Bash rule decision, not at daemon start (python -X importtime)
    import tree_sitter
    import tree_sitter_bash
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


@lru_cache(maxsize=128)
def analyse(text: str) -> Line:
    """The commands of a command line and what in it, if anything, is opaque. Never raises."""
    try:
        source = text.encode("utf-8")
    except UnicodeEncodeError:
        return Line((), "text that is not UTF-8")
    reasons = ["a carriage return, vertical tab or form feed"] if _FALSE_BLANKS.search(text) \
        else []
    with _lock:
        tree = _parser().parse(source)
    commands: list[Command] = []
    stack = [tree.root_node]
    while stack:  # iterative: a line nested 10,000 deep must not overflow Python's stack
        node = stack.pop()
        reason = _check(node)
        if reason:
            reasons.append(reason)
        if node.type in _COMMANDS:
            commands.append(_command(node))
        stack.extend(reversed(node.children))
    if tree.root_node.has_error and not reasons:
        reasons.append("a syntax error")
    if not reasons and not _continuations_agree(source, tree.root_node):
        reasons.append("a line continuation that is not at the end of a line")
    return Line(tuple(commands), reasons[0] if reasons else None)


def _continuations_agree(source: bytes, root: Any) -> bool:
    """Whether each `\\<newline>` outside quotes and comments ends a line after a blank, the
    only place the parser and bash agree on it: bash joins `git status\\<newline>x` into
    `statusx`, and reads `a<newline>\\<newline>rm x` as two commands."""
    for match in _CONTINUATION.finditer(source):
        at = match.end() - 2
        leaf = root.descendant_for_byte_range(at, at + 2)
        if leaf is not None and leaf.type in _QUOTED_LEAVES:
            continue
        line = source[source.rfind(b"\n", 0, at) + 1:at]
        if not line.endswith((b" ", b"\t")) or not line.strip():
            return False
    return True


def _text(node: Any) -> str:
    return node.text.decode("utf-8", errors="replace")


def _check(node: Any) -> str | None:
    """Why this node alone makes the line opaque, or None."""
    kind = node.type
    if not node.is_named:
        return None
    if not node.children and kind not in _LITERAL_LEAVES and _UNREAD.search(_text(node)):
        return f"an expansion the parser did not read ({_text(node)})"
    if kind in _PLAIN_NODES or kind in _COMMANDS:
        return None
    if kind in _OPAQUE:
        return _OPAQUE[kind]
    if kind == "variable_assignment":
        return None if node.parent is not None and node.parent.type == "command" else \
            "a variable assignment"
    if kind == "compound_statement":  # `{ …; }`, but also `(( … ))`
        return None if node.children and node.children[0].type == "{" else "arithmetic"
    if kind == "command_substitution":
        return "backticks" if node.children and node.children[0].type == "`" else None
    if kind == "expansion":
        ops = {c.type for c in node.children if not c.is_named}
        return None if ops <= _EXPANSION_OPS else f"the expansion {_text(node)}"
    if kind == "file_redirect":
        return _redirect(node)
    return f"unsupported shell syntax ({kind})"


def _redirect(node: Any) -> str | None:
    ops = [c.type for c in node.children if not c.is_named]
    targets = [c for c in node.children if c.is_named and c.type != "file_descriptor"]
    fds = [c for c in node.children if c.type == "file_descriptor"]
    op = ops[0] if len(ops) == 1 else ""
    if all(_text(fd).isdigit() for fd in fds):
        if op in (">&-", "<&-") and not targets:
            return None
        if len(targets) == 1:
            target = _text(targets[0])
            if op in (">&", "<&") and (target.isdigit() or target == "-"):
                return None
            if op in _NULL_OPS and targets[0].type == "word" and target == "/dev/null":
                return None
    return f"a redirection to or from a file ({_text(node).strip()})"


def _command(node: Any) -> Command:
    parts = [c for c in node.children if c.type not in _REDIRECTS and c.type != "comment"]
    return Command(tuple(_text(c) for c in parts), tuple(_plain(c) for c in parts))


def _plain(node: Any) -> str:
    """The word without literal quoting; as written when it is not a literal."""
    kind, text = node.type, _text(node)
    if kind == "raw_string":
        return text[1:-1]
    if kind == "word":
        return _ESCAPE.sub(r"\1", text.replace("\\\n", ""))
    if kind == "string" and all(c.type in ('"', "string_content") for c in node.children):
        return "".join(_text(c) for c in node.children if c.type == "string_content")
    if kind in ("command_name", "concatenation", "number"):
        return "".join(_plain(c) for c in node.children) if node.children else text
    return text


# --- for deny and ask rules: every way a line may run a command ------------------------------

def reachable(text: str, depth: int = 0) -> Iterator[Command]:
    """The commands of the line, and those of the strings it hands to `bash -c` or `eval`."""
    for command in analyse(text).commands:
        yield command
        if depth < _DEPTH:
            for words in spellings(command, as_written=False):
                if (inner := _inner_script(words)) is not None:
                    yield from reachable(inner, depth + 1)
                    break


def _inner_script(words: tuple[str, ...]) -> str | None:
    if not words:
        return None
    if words[0] == "eval":
        return " ".join(words[1:])
    if words[0] in SHELLS:
        for i, word in enumerate(words[1:-1], 1):
            if re.fullmatch(r"-[a-zA-Z]*c[a-zA-Z]*", word):
                return words[i + 1]
    return None


def _unwrapped(words: tuple[str, ...]) -> tuple[str, ...]:
    """Without the assignments before the name, and the name without its folder."""
    i = 0
    while i < len(words) and re.match(r"[A-Za-z_][A-Za-z0-9_]*\+?=", words[i]):
        i += 1
    rest = words[i:]
    return (os.path.basename(rest[0]),) + rest[1:] if rest and "/" in rest[0] else rest


def spellings(command: Command, as_written: bool = True) -> Iterator[tuple[str, ...]]:
    """Word sequences a deny rule is compared with: as written, unquoted, without assignments
    or the command's folder, and what follows the name of a command that runs another
    (`sudo rm -rf x`, `xargs rm`, `timeout 5 rm x`)."""
    if as_written:
        yield command.words
    yield command.plain
    words = _unwrapped(command.plain)
    yield words
    if words and words[0] in RUNNERS:
        for i in range(1, len(words)):
            yield _unwrapped(words[i:])
