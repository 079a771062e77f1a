"""Compaction by the model: a forked query (source "compact") summarises the history.

Given the session's system prompt and tools (`prefix`), the summary call sends them and the
history as the session's own calls did, with the instructions in a last user message: its
prompt then starts with what those calls cached, and the call reads the conversation from the
prompt cache instead of paying for all of it again. The tools are offered (changing them
would miss the whole cache) but none runs; the instructions say not to call them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import anyio

from heddle.context.compactor import CompactResult
from heddle.context.pipeline import CONTINUATION
from heddle.context.windows import Limits, estimate_tokens
from heddle.core.events import Terminal, TerminalReason
from heddle.core.messages import Message, TextBlock, ToolResultBlock, append_user, to_api, user_text
from heddle.core.stream import ModelCaller
from heddle.core.tools import ToolContext
from heddle.loop.deps import LoopDeps
from heddle.loop.executor import Toolbox
from heddle.loop.params import LoopConfig, LoopRuntime
from heddle.loop.query import drive, query
from heddle.loop.thinking import ThinkingChoice
from heddle.permissions.policy import PermissionPolicy

SUMMARY_SYSTEM = ("You write the working notes that let a coding agent continue a task after its "
                  "conversation history is cleared. Be specific and complete; no preamble.")
SUMMARY_REQUEST = """Summarise the conversation so far so that the work can continue without it.
Include, under these headings:
1. Goal: what the user asked for, in their words where it matters.
2. Open todo items.
3. Files: each file read or edited, and what changed.
4. Decisions: what was decided and why.
5. Errors and fixes.
6. Next step: exactly what to do next.
Answer with the summary only."""
RESUME = "Continue the task from the next step in the summary."
IN_SESSION = ("Stop working on the task now: do not call any tool. Write the working notes that "
              "let you continue it after this conversation is cleared.\n\n" + SUMMARY_REQUEST)


@dataclass(frozen=True)
class Prefix:
    """What the session's own calls send before the messages: kept identical for the cache."""

    system: str
    tools: tuple[dict, ...]
    cache_ttl: str | None
    thinking: ThinkingChoice = ThinkingChoice()
    """The session's: the thinking setting is part of what a cached prefix of the messages
    depends on."""


@dataclass(frozen=True)
class _OfferedOnly:
    """A tool runner that offers the session's tools and runs none of them."""

    offered: tuple[dict, ...]

    def schemas(self) -> tuple[dict, ...]:
        return self.offered

    def batch(self, task_group, permissions, repeats=None):
        return Toolbox({}, ToolContext(workspace=Path.cwd()), _no_asking).batch(task_group,
                                                                               permissions)


class CompactError(Exception):
    """Compaction failed; the loop surfaces the original error instead."""


@dataclass(frozen=True)
class ModelCompactor:
    model: ModelCaller
    max_tokens: int = 8192
    compact_model: str | None = None
    """Model that writes summaries; None: the session's model."""
    prefix: Prefix | None = None
    """The session's system prompt and tools; None: a summary prompt of its own."""
    limits_for: Callable[[str], Limits] | None = None
    """The limits of the model that writes summaries; None: the built-in table's."""

    async def __call__(self, messages: tuple[Message, ...], model: str,
                       reason: str) -> CompactResult:
        model = self.compact_model or model
        before = estimate_tokens(to_api(messages))
        p = self.prefix
        if p is None:
            request = append_user(messages, (TextBlock(SUMMARY_REQUEST),))
            config = LoopConfig(system=SUMMARY_SYSTEM, model=model, source="compact",
                                max_turns=1, max_tokens=self.max_tokens,
                                limits_for=self.limits_for)
            tools = Toolbox({}, ToolContext(workspace=Path.cwd()), _no_asking)  # nothing runs
        else:
            request = append_user(messages, (TextBlock(IN_SESSION),))
            # the session's tools are offered (for the cache) and the prompt says not to call
            # them; a model that calls one anyway is told it cannot, and gets a second call
            config = LoopConfig(system=p.system, model=model, source="compact", max_turns=2,
                                max_tokens=self.max_tokens, cache_ttl=p.cache_ttl,
                                limits_for=self.limits_for, thinking=p.thinking)
            tools = _OfferedOnly(p.tools)
        seams = LoopDeps(self.model, tools, PermissionPolicy(mode="plan"))
        async with anyio.create_task_group() as tg:
            terminal: Terminal = await drive(query(request, config, seams, LoopRuntime(tg)),
                                             lambda ev: None)
        if terminal.reason is not TerminalReason.COMPLETED or not terminal.text.strip():
            detail = terminal.error.message if terminal.error else terminal.reason.value
            raise CompactError(f"compaction failed: {detail}")
        summary = terminal.text.strip()
        compacted = (user_text(CONTINUATION.format(summary=summary)),)
        prompt = _last_prompt(messages)
        compacted = append_user(compacted, prompt.content if prompt else (TextBlock(RESUME),))
        return CompactResult(compacted, summary, before, estimate_tokens(to_api(compacted)))


def _last_prompt(messages: tuple[Message, ...]) -> Message | None:
    """The user's latest own message (text only, not tool results), if it is the last one."""
    last = messages[-1] if messages else None
    if last and last.role == "user" and not any(isinstance(b, ToolResultBlock) for b in last.content):
        return last
    return None


async def _no_asking(prompt):
    raise RuntimeError("compaction runs no tools")
