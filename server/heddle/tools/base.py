"""Helpers the tools share: the schema the model sees, and capping over-long results."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import msgspec

from heddle.core.tools import Tool


def schema_of(tool: Tool) -> dict[str, Any]:
    """The tool's definition as the Messages API takes it (built once per tool class: a few
    milliseconds each time otherwise, on every turn)."""
    return _schema(type(tool))


@functools.lru_cache(maxsize=None)
def _schema(tool: type) -> dict[str, Any]:
    (ref,), components = msgspec.json.schema_components([tool.input_type])
    schema = dict(components[tool.input_type.__name__])
    schema.pop("title", None)
    return {"name": tool.name, "description": tool.description, "input_schema": schema}


def budget_result(text: str, limit: int, folder: Path | None, call_id: str) -> str:
    """Layer 0 of the context pipeline: an over-long result keeps its head and tail, and its
    full text is saved to a file the model can page through with Read."""
    short = cap(text, limit)
    if folder is None:
        return short
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{call_id}.txt"
        path.write_text(text, encoding="utf-8")
    except OSError:
        return short
    return (f"{short}\n\n[The full result ({len(text):,} characters) is saved in {path}; "
            "read it with Read, using offset and limit, if you need the omitted part.]")


def cap(text: str, limit: int) -> str:
    """Keep head and tail of an over-long result, saying how much was left out."""
    if len(text) <= limit:
        return text
    head = text[: limit * 2 // 3]
    tail = text[-(limit // 3):]
    return f"{head}\n\n[... {len(text) - len(head) - len(tail)} characters omitted ...]\n\n{tail}"
