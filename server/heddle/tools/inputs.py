"""Taking tool input as models write it: other names for a field, and fields a tool lacks.

An input Struct may name aliases (`aliases: ClassVar[dict[str, str]]`, alias → the field's
name as the model sees it): `file_path` for `path`, as Claude models are trained to write
them. An alias given alone is taken as its field; given beside the field with another value,
it is an error. A field the input does not have is dropped and reported, at any depth
(`edits[1].note`), so the call runs and the model learns the field did nothing; a wrong type
for a known field is still an error, which `explain` completes with what the field is.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
import msgspec.inspect as mi

from heddle.core.tools import Tool, ToolError
from heddle.tools.base import schema_of


def accept(tool: Tool, raw: Any) -> tuple[Any, list[str]]:
    """`raw` with aliases resolved and unknown fields dropped, and the dropped fields' paths;
    ToolError if an alias and its field disagree. Input that is not a Struct's (an MCP tool's)
    is passed on as it is."""
    if not isinstance(tool.input_type, type) or not issubclass(tool.input_type, msgspec.Struct):
        return raw, []
    dropped: list[str] = []
    return _accept(tool.name, _info(tool.input_type), raw, "", dropped), dropped


def ignored_note(tool: Tool, dropped: list[str]) -> str:
    """What the model reads about the fields it gave that the tool does not have."""
    names = ", ".join(f"`{d}`" for d in dropped)
    fields = _fields_of(tool)
    return (f"(Ignored unknown field{'s' if len(dropped) > 1 else ''} {names}: {tool.name} "
            f"takes {fields}.)")


_AT = re.compile(r"- at `\$\.([A-Za-z_-][\w-]*)`$")


def explain(tool: Tool, message: str) -> str:
    """A validation error of a top-level field, with what the schema says that field is (its
    unit and bounds)."""
    match = _AT.search(message)
    if match is None:
        return message
    field = schema_of(tool)["input_schema"].get("properties", {}).get(match.group(1), {})
    described = field.get("description")
    return f"{message} ({match.group(1)}: {described})" if described else message


def _info(input_type: type) -> mi.Type:
    return mi.type_info(input_type)


def _accept(tool: str, info: mi.Type, raw: Any, where: str, dropped: list[str]) -> Any:
    while isinstance(info, mi.Metadata):
        info = info.type
    if isinstance(info, mi.StructType) and isinstance(raw, dict):
        return _struct(tool, info, raw, where, dropped)
    if isinstance(info, (mi.ListType, mi.VarTupleType)) and isinstance(raw, list):
        return [_accept(tool, info.item_type, v, f"{where}[{i}]", dropped)
                for i, v in enumerate(raw)]
    return raw


def _struct(tool: str, info: mi.StructType, raw: dict[str, Any], where: str,
            dropped: list[str]) -> dict[str, Any]:
    fields = {f.encode_name: f for f in info.fields}
    aliases: dict[str, str] = getattr(info.cls, "aliases", {})
    out: dict[str, Any] = {}
    for key, value in raw.items():
        name = aliases.get(key, key) if key not in fields else key
        if name not in fields:
            dropped.append(_join(where, key))
            continue
        if name in out and out[name] != value:
            other = next(k for k in raw if k != key and aliases.get(k, k) == name)
            raise ToolError(
                f"Invalid input for {tool}: `{other}` and `{key}` are the same field, given "
                f"different values ({_short(raw[other])} and {_short(value)}); give only "
                f"`{name}`")
        out[name] = _accept(tool, fields[name].type, value, _join(where, name), dropped)
    return out


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _fields_of(tool: Tool) -> str:
    info = _info(tool.input_type)
    assert isinstance(info, mi.StructType)
    aliases: dict[str, str] = getattr(info.cls, "aliases", {})
    names = []
    for f in info.fields:
        others = [a for a, n in aliases.items() if n == f.encode_name]
        names.append(f.encode_name + (f" (or {', '.join(others)})" if others else ""))
    return ", ".join(names)
