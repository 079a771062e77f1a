"""The system prompt and the user message a turn starts with."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

BASE_PROMPT = """You are Heddle, a coding agent working inside the user's editor.
The workspace is {workspace}. Relative paths are resolved against it.
Work step by step: read and search before you change code, make focused edits with the Edit
tool, and run commands with Bash when it helps to check your work. Some tools ask the user
for permission; if a call is rejected, respect the reason you are given.
Answer concisely in Markdown."""


@dataclass(frozen=True)
class ContextItem:
    path: str
    text: str | None = None
    start_line: int | None = None
    end_line: int | None = None
    language: str | None = None


def system_prompt(workspace: Path, extra: str | None) -> str:
    prompt = BASE_PROMPT.format(workspace=workspace)
    return f"{prompt}\n\n{extra}" if extra else prompt


def user_prompt(prompt: str, context: list[ContextItem]) -> str:
    """The prompt, preceded by what the user is looking at."""
    if not context:
        return prompt
    parts = ["The user is looking at:"]
    for item in context:
        where = item.path
        if item.start_line is not None:
            where += f" (lines {item.start_line}-{item.end_line})"
        if item.text is None:
            parts.append(f"- {where}")
        else:
            fence = "````" if "```" in item.text else "```"
            parts.append(f"- {where}:\n{fence}{item.language or ''}\n{item.text}\n{fence}")
    return "\n".join(parts) + f"\n\n{prompt}"
