"""Saving and removing rules in a settings file, keeping the rest of the file as it was.

The file is edited with tomlkit, which keeps comments, order and layout: only the one
`permissions.<kind>` array changes (inline tables and dotted keys included). The edited text is
parsed again and compared with the intended data; should tomlkit's edit not round-trip, the
file is written out in a plain form instead. A file that is not valid TOML, or whose
`permissions` or rule list is not a table or an array, is never overwritten: saving fails and
says why.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from heddle.atomic import write_atomic
from heddle.regular import read_regular
from heddle.rules import RuleKind


class SettingsWriteError(Exception):
    """The rule could not be saved; the message says why."""


@dataclass(frozen=True)
class Saved:
    """A rule change written to a settings file."""

    edited: dict[str, Any]
    """The settings the change was made to, as read (the file missing: {})."""
    written: bytes
    """The file's content written."""


def add_rule(path: Path, kind: RuleKind, rule: str) -> Saved | None:
    """Append `rule` to `permissions.<kind>` in `path`; None if it was there already."""
    text, data = _read(path)
    rules = _rules(path, data, kind)
    if rule in rules:
        return None
    return Saved(data, _write(path, text, data, kind, rules + [rule]))


def remove_rule(path: Path, kind: RuleKind, rule: str) -> Saved | None:
    """Remove `rule` from `permissions.<kind>` in `path`; None if it was not there."""
    text, data = _read(path)
    rules = _rules(path, data, kind)
    if rule not in rules:
        return None
    return Saved(data, _write(path, text, data, kind, [r for r in rules if r != rule]))


READ_LIMIT = 1 << 20
"""Bytes a settings file to save into may hold (as loading it reads)."""


def _read(path: Path) -> tuple[str, dict[str, Any]]:
    try:  # a named pipe there would block a plain read until something writes to it
        text = read_regular(path, READ_LIMIT).decode("utf-8")
    except FileNotFoundError:
        return "", {}
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsWriteError(f"cannot read {path}: {exc}") from None
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SettingsWriteError(f"{path} is not valid TOML ({exc}); fix it before saving "
                                 "rules to it") from None


def _rules(path: Path, data: dict[str, Any], kind: str) -> list[Any]:
    permissions = data.get("permissions", {})
    if not isinstance(permissions, dict):
        raise SettingsWriteError(f"{path}: permissions is not a table; fix it before saving "
                                 "rules to it")
    rules = permissions.get(kind, [])
    if not isinstance(rules, list):
        raise SettingsWriteError(f"{path}: permissions.{kind} is not an array; fix it before "
                                 "saving rules to it")
    return rules


def _write(path: Path, text: str, data: dict[str, Any], kind: str, rules: list[Any]) -> bytes:
    import tomlkit  # imported at the first settings write, not at daemon start

    expected = {**data, "permissions": {**data.get("permissions", {}), kind: rules}}
    try:
        new = _edited(tomlkit, text, kind, rules)
        ok = tomllib.loads(new) == expected
    except (tomlkit.exceptions.TOMLKitError, tomllib.TOMLDecodeError, ValueError, TypeError,
            KeyError):  # tomlkit could not edit this file: the plain form below
        ok = False
    if not ok:
        new = dump(expected)
    written = new.encode("utf-8")
    try:  # a settings file kept in a dotfiles repository (a symlink) stays a link
        write_atomic(path, written, follow_symlinks=True)
    except OSError as exc:
        raise SettingsWriteError(f"cannot write {path}: {exc.strerror or exc}") from None
    return written


def _edited(tomlkit: Any, text: str, kind: str, rules: list[Any]) -> str:
    """The text with `permissions.<kind>` set to `rules`, everything else as it was."""
    doc = tomlkit.parse(text)
    permissions = doc.get("permissions")
    if permissions is None:
        permissions = tomlkit.table()
        doc.add("permissions", permissions)
    array = permissions.get(kind)
    if array is None:
        items = [tomlkit.item(rule).as_string() for rule in rules]
        if isinstance(permissions, tomlkit.items.InlineTable):  # it must stay on its line
            value = f"[{', '.join(items)}]"
        else:  # one rule a line, like the arrays people write
            value = "[\n" + "".join(f"  {item},\n" for item in items) + "]"
        permissions[kind] = tomlkit.parse(f"a = {value}\n")["a"]
        return tomlkit.dumps(doc)
    keep = [i for i, value in enumerate(array) if value in rules]
    for i in reversed(range(len(array))):  # removing item by item keeps the others' comments
        if i not in keep:
            del array[i]
    for rule in rules[len(keep):]:
        array.append(rule)
    return tomlkit.dumps(doc)


def dump(data: dict[str, Any]) -> str:
    """A plain TOML document of `data`."""
    import tomlkit
    return tomlkit.dumps(data)
