"""Saving and removing rules in a settings file, keeping the rest of the file as it was.

Only the `permissions.<kind>` array is rewritten, in place, so comments and everything else
survive. The edited text is parsed again and compared with the intended data; if the file's
layout defeats the in-place edit (an inline table, dotted keys), the whole file is written out
in a plain canonical form instead. A file that is not valid TOML is never overwritten.
"""

from __future__ import annotations

import os
import re
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from heddle.rules import RuleKind


class SettingsWriteError(Exception):
    """The rule could not be saved; the message says why."""


def add_rule(path: Path, kind: RuleKind, rule: str) -> bool:
    """Append `rule` to `permissions.<kind>` in `path`; False if it was there already."""
    text, data = _read(path)
    rules = _rules(data, kind)
    if rule in rules:
        return False
    _write(path, text, data, kind, rules + [rule])
    return True


def remove_rule(path: Path, kind: RuleKind, rule: str) -> bool:
    """Remove `rule` from `permissions.<kind>` in `path`; False if it was not there."""
    text, data = _read(path)
    rules = _rules(data, kind)
    if rule not in rules:
        return False
    _write(path, text, data, kind, [r for r in rules if r != rule])
    return True


def _read(path: Path) -> tuple[str, dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return "", {}
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsWriteError(f"cannot read {path}: {exc}") from None
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SettingsWriteError(f"{path} is not valid TOML ({exc}); fix it before saving "
                                 "rules to it") from None


def _rules(data: dict[str, Any], kind: str) -> list[str]:
    permissions = data.get("permissions", {})
    value = permissions.get(kind, []) if isinstance(permissions, dict) else []
    return [r for r in value if isinstance(r, str)] if isinstance(value, list) else []


def _write(path: Path, text: str, data: dict[str, Any], kind: str, rules: list[str]) -> None:
    expected = dict(data)
    permissions = dict(data.get("permissions", {}) if isinstance(data.get("permissions"), dict) else {})
    permissions[kind] = rules
    expected["permissions"] = permissions
    new = _edit_in_place(text, kind, rules)
    try:
        ok = new is not None and tomllib.loads(new) == expected
    except tomllib.TOMLDecodeError:
        ok = False
    if not ok:
        new = dump(expected).lstrip("\n")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(new)
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except OSError as exc:
        raise SettingsWriteError(f"cannot write {path}: {exc.strerror or exc}") from None


# --- in-place edit --------------------------------------------------------------------------

_HEADER = re.compile(r"^\s*\[\s*permissions\s*\]\s*(#.*)?$")
_ANY_HEADER = re.compile(r"^\s*\[")


def _edit_in_place(text: str, kind: str, rules: list[str]) -> str | None:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    value = _array(rules)
    start = next((i for i, line in enumerate(lines) if _HEADER.match(line)), None)
    if start is None:
        gap = "\n" if lines and lines[-1].strip() else ""
        return "".join(lines) + f"{gap}[permissions]\n{kind} = {value}\n"
    end = next((i for i in range(start + 1, len(lines)) if _ANY_HEADER.match(lines[i])
                and not _inside_array(lines, start + 1, i)), len(lines))
    key = re.compile(rf"^\s*{kind}\s*=")
    at = next((i for i in range(start + 1, end) if key.match(lines[i])), None)
    if at is None:
        return "".join(lines[:start + 1] + [f"{kind} = {value}\n"] + lines[start + 1:])
    body = "".join(lines[at:])
    eq = body.index("=")
    stop = _value_end(body, eq + 1)
    if stop is None:
        return None
    rest = body[stop:]
    return "".join(lines[:at]) + body[:eq] + "= " + value + rest


def _inside_array(lines: list[str], begin: int, i: int) -> bool:
    """Whether line i continues a multi-line array that started after `begin` (rough)."""
    depth = 0
    for line in lines[begin:i]:
        code = line.split("#", 1)[0]
        depth += code.count("[") - code.count("]")
    return depth > 0


def _value_end(text: str, i: int) -> int | None:
    """Index just past the TOML value starting at or after i (an array or a string)."""
    while i < len(text) and text[i] in " \t":
        i += 1
    if i >= len(text) or text[i] != "[":
        return None
    depth, quote = 0, ""
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\" and quote == '"':
                i += 1
            elif c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        elif c == "#":
            nl = text.find("\n", i)
            i = len(text) if nl < 0 else nl
            continue
        elif c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


# --- canonical form -------------------------------------------------------------------------

def _string(s: str) -> str:
    out = s.replace("\\", "\\\\").replace('"', '\\"')
    out = re.sub(r"[\x00-\x1f\x7f]", lambda m: {"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(
        m.group(), f"\\u{ord(m.group()):04x}"), out)
    return f'"{out}"'


def _array(items: list[Any]) -> str:
    if not items:
        return "[]"
    return "[\n" + "".join(f"  {_scalar(v)},\n" for v in items) + "]"


def _scalar(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, list):
        return _array(v)
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_scalar(x)}" for k, x in v.items()) + " }"
    return _string(str(v))


def _key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else _string(k)


def _is_table_array(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)


def dump(data: dict[str, Any], prefix: str = "") -> str:
    """A plain TOML document: values first, then tables and arrays of tables."""
    out = [f"{_key(k)} = {_scalar(v)}\n" for k, v in data.items()
           if not isinstance(v, dict) and not _is_table_array(v)]
    for k, v in data.items():
        name = f"{prefix}.{_key(k)}" if prefix else _key(k)
        if isinstance(v, dict):
            out.append(f"\n[{name}]\n" + dump(v, name).lstrip("\n"))
        elif _is_table_array(v):
            for item in v:
                out.append(f"\n[[{name}]]\n" + dump(item, name).lstrip("\n"))
    return "".join(out)
