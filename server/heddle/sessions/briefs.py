"""A session's briefing: the environment and instruction blocks of its first user message, the
short updates of later turns, folder instructions met on the way, and the same briefing for
its sub-agents.

The conversation is the record of what the model was told: a turn looks in the session's
messages for an environment block (a loaded session has its first message back from the
transcript), and a tool result for a folder's instructions, so nothing is said twice, and
what a compaction removed is said again when it matters.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path
from typing import Callable, Iterator

from heddle.briefing import environment as env
from heddle.briefing import instructions as ins
from heddle.briefing.gather import BOUND
from heddle.core.messages import Block, Message, TextBlock, ToolResultBlock
from heddle.model.limits import knowledge_cutoff
from heddle.xdg import config_dir

log = logging.getLogger(__name__)

FileHook = Callable[[str, Path], "str | None"]


@dataclass
class Briefing:
    """What a live session knows of its briefing."""

    instructions: ins.Instructions
    """Read when the session was made or loaded (`session/new` and `session/load` list them)."""
    environment: env.Environment | None = None
    """Gathered at this daemon's first turn of the session."""
    folders: set[Path] = field(default_factory=set)
    """Folders below the workspace whose instructions the main conversation has (or that have
    none): found in the conversation at each turn's start (so a folder whose file a compaction
    removed is told again), added to as the turn meets more."""


@dataclass(frozen=True)
class AgentBrief:
    """What a sub-agent of the turn is told besides its task and its role."""

    opening: tuple[Block, ...]
    """The environment and instruction blocks, before the task."""
    on_file: Callable[[], FileHook]
    """A fresh hook for each sub-agent: its conversation has seen no folder's file yet."""


def read(workspace: Path) -> Briefing:
    """The briefing of a session in `workspace`: its instruction files as they are now."""
    return Briefing(ins.read_instructions(workspace, config_dir()))


def _texts(messages: tuple[Message, ...]) -> Iterator[str]:
    for m in messages:
        if m.role != "user":
            continue
        for b in m.content:
            if isinstance(b, TextBlock):
                yield b.text
            elif isinstance(b, ToolResultBlock):
                yield b.text


async def opening(briefing: Briefing, workspace: Path, model: str,
                  messages: tuple[Message, ...], today: date | None = None,
                  bound: float = BOUND) -> tuple[tuple[Block, ...], AgentBrief]:
    """The blocks a turn's prompt starts with: the whole briefing when the conversation holds
    none, else an update when the date or model changed (else nothing); and what the turn's
    sub-agents are told."""
    day = (today or date.today()).isoformat()
    cutoff = knowledge_cutoff(model)
    if briefing.environment is None:
        briefing.environment = await env.environment(workspace, model, cutoff,
                                                     today or date.today(), bound)
    briefing.environment = replace(briefing.environment, today=day, model=model, cutoff=cutoff)
    texts = list(_texts(messages))
    # in place: the turns' file hooks hold this set
    briefing.folders.clear()
    briefing.folders.update(ins.nested_seen(texts))
    whole = tuple(TextBlock(t) for t in (env.render(briefing.environment),
                                         ins.render(briefing.instructions)) if t)
    agents = AgentBrief(whole, lambda: file_hook(briefing.instructions, set()))
    said = env.said(texts)
    if said is None:
        return whole, agents
    note = env.update(said, day, model, cutoff)
    return ((TextBlock(note),) if note else ()), agents


def file_hook(instructions: ins.Instructions, seen: set[Path]) -> FileHook:
    """`ToolContext.on_file` for a conversation that has met the folders in `seen`."""
    def on_file(tool: str, path: Path) -> str | None:
        try:
            return ins.nested(instructions, path, seen)
        except (OSError, ValueError):  # a folder gone meanwhile: the call's result stands
            log.warning("cannot read the instructions of %s's folders", path, exc_info=True)
            return None
    return on_file


def listed(briefing: Briefing | None) -> list[ins.InstructionFile]:
    """The instruction files in force (for `session/new` and `session/load`)."""
    return [] if briefing is None else list(briefing.instructions.files)
