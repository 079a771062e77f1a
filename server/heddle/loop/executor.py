"""Runs the tool calls of one model response, starting safe ones while the model still streams.

Order of work for one call: the repeat guard → validate the input → normalise it (absolute
paths, the workspace boundary) → PreToolUse hooks → rules and mode → ask the editor if needed
→ run → PostToolUse hooks; the repeat guard counts its result. Concurrency-safe calls start as soon as their block is complete, unless an
unsafe call came before them; unsafe calls wait for the response to end and run one at a time.
Results are returned in request order, and every call gets one, cancelled or not.

`Toolbox` is the loop's `ToolRunner` over this executor: a turn's tools, the context they run
with, and how to ask the editor; it opens one `ToolExecutor` per model response.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import anyio
import anyio.abc
import msgspec

from heddle.core.events import (CoreEvent, DiffPreview, PermissionAnswered, PermissionAsked,
                                PlanPreview, Preview, ToolCallFinished)
from heddle.core.hunks import Review, review
from heddle.core.messages import (ImageBlock, ImageSource, TextBlock, ToolResultBlock, ToolUseBlock,
                                  well_formed)
from heddle.core.tools import CURRENT_CALL, ReviewedTool, Tool, ToolContext, ToolError
from heddle.loop.deps import PermissionDecider
from heddle.loop.repeats import (Loop, Outcome, RepeatLimits, Repeats, after, after_response,
                                 before, call_key, describe, is_edit, refusal, result_digest,
                                 warning)
from heddle.permissions.hooks import (HookRunner, PostToolFeedback, PreToolVerdict,
                                      post_tool_use, pre_tool_use)
from heddle.permissions.policy import (Ask, Asker, Deny, PermissionAnswer, PermissionPrompt,
                                       Rule, RuleError, SettingsWriteError)
from heddle.rules import RuleScope
from heddle.shown import one_line
from heddle.tools.base import budget_result, schema_of
from heddle.tools.plan import rejected as plan_rejected
from heddle.tools.inputs import accept, explain, ignored_note

log = logging.getLogger(__name__)

FILE_TOOLS = ("Read", "Edit", "MultiEdit", "Write")
"""The tools that read or change one file (`path`): `ToolContext.on_file` hears of them."""


@dataclass
class _Call:
    block: ToolUseBlock
    input_error: str | None
    tool: Tool | None
    result: ToolResultBlock | None = None
    started: bool = False
    exit: tuple[int | None, str | None] = (None, None)
    """The command's exit code and killing signal, when the tool ran one."""
    failed: bool = False
    """The command failed (non-zero exit, a signal): shown as an error, although the model's
    result is not marked as one (it reads the exit status in the text)."""
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    """Cancelled when the call's result is discarded while it runs."""
    images: tuple[tuple[str, str], ...] = ()
    """(media type, base64) of the images its result shows the model (an MCP tool's)."""
    loop: Loop | None = None
    """The run of repetitions the call would extend past the repeat guard's limit."""
    refused: bool = False
    """The repeat guard did not run it."""
    outcome: Outcome | None = None
    """What the repeat guard counts of it, once it ran."""
    ignored: list[str] = field(default_factory=list)
    """The input's fields the tool does not have: dropped, and noted in the result."""
    note: str | None = None
    """Text added after the result once it is within its size budget (`ToolContext.on_file`)."""

    @property
    def safe(self) -> bool:
        return self.tool is not None and self.tool.concurrency_safe


@dataclass
class ToolExecutor:
    tools: dict[str, Tool]
    ctx: ToolContext
    policy: PermissionDecider
    asker: Asker
    task_group: anyio.abc.TaskGroup
    permission_lock: anyio.Lock = field(default_factory=anyio.Lock)
    calls: list[_Call] = field(default_factory=list)
    _queued: list[_Call] = field(default_factory=list)
    _running: int = 0
    _idle: anyio.Event = field(default_factory=anyio.Event)
    _done: anyio.Event = field(default_factory=anyio.Event)
    stop_reason: str | None = None
    """Set when a tool hook asked to end the turn after this batch (`{"continue": false}`)."""
    streaming: tuple[str, str] | None = None
    """(id, tool) of the tool_use block whose input is still streaming: started, not added."""
    _asking: set[str] = field(default_factory=set)
    """Ids of the calls whose permission prompt is open."""
    start: Repeats = Repeats(RepeatLimits(0, 0))
    """The repeat guard's count before this batch: what its calls are judged against."""

    def __post_init__(self) -> None:
        self._idle.set()

    @property
    def blocks(self) -> Sequence[ToolUseBlock]:
        return [c.block for c in self.calls]

    @property
    def repeats(self) -> Repeats:
        """The repeat guard's count with this batch's calls (those that have ended)."""
        return after_response(self.start, [c.loop if c.refused else c.outcome
                                           for c in self.calls if c.refused or c.outcome])

    @property
    def caught(self) -> tuple[ToolUseBlock, Loop] | None:
        """The first call the repeat guard refused, and the run it would have extended."""
        return next(((c.block, c.loop) for c in self.calls if c.refused and c.loop), None)

    def begin(self, block_id: str, tool: str) -> None:
        """A tool_use block started in the stream; `add` follows once its input is complete."""
        self.streaming = (block_id, tool)

    def add(self, block: ToolUseBlock, input_error: str | None = None) -> None:
        """A tool_use block is complete in the stream."""
        self.streaming = None
        call = _Call(block, input_error, self.tools.get(block.name))
        call.loop = before(self.start, block.name, call_key(block.name, block.input))
        self.calls.append(call)
        if call.safe and not self._queued:
            self._start(call)
        else:
            self._queued.append(call)

    def finish_intake(self) -> None:
        """The response has ended: run what is queued, in order."""
        self.task_group.start_soon(self._drain_queue)

    async def wait(self) -> None:
        await self._done.wait()

    def results(self, missing: str) -> tuple[ToolResultBlock, ...]:
        """One result per call in request order; calls without one get `missing` as an error."""
        return tuple(c.result or ToolResultBlock(c.block.id, missing, True) for c in self.calls)

    def title(self, block: ToolUseBlock) -> str:
        """The call's title, safe to show (`one_line`: the input is the model's)."""
        tool = self.tools.get(block.name)
        if tool is None:
            return one_line(block.name)
        try:
            return one_line(tool.title(msgspec.convert(accept(tool, block.input)[0],
                                                       tool.input_type), self.ctx))
        except Exception:  # the title is cosmetic; invalid input is reported when the tool runs
            return one_line(block.name)

    def discard(self, why: str, running: bool = False, finished: bool = False
                ) -> list[CoreEvent]:
        """End the calls whose results the model will not get, `cancelled`, saying `why`, so
        that what the editor is told of each call is what the model is told.

        Queued calls never run, and a call whose input was still streaming never starts (so
        every `ToolCallStarted` gets its `ToolCallFinished`). With `running`, a started
        read-only call is stopped and its result discarded (else it finishes on its own: a
        cancelled turn stops it). With `finished` the whole response is dropped (the model will
        never see these calls), and a call that had finished is reported again, `cancelled`.
        The calls kept in the conversation get a tool_result that says what happened."""
        self._queued.clear()
        events: list[CoreEvent] = []
        for c in self.calls:
            if c.result is not None and not finished or c.started and not running:
                continue
            if not c.started:
                summary, text = f"not run: {why}", f"This tool call did not run: {why}."
            else:
                c.scope.cancel()  # a read-only call: stopping it changes nothing
                if c.block.id in self._asking:  # its prompt is answered first, as always
                    self._asking.remove(c.block.id)
                    events.append(PermissionAnswered(c.block.id, "cancelled",
                                                     reason=f"the call was discarded: {why}"))
                summary = f"discarded: {why}"
                text = f"This tool call's result was discarded: {why}."
            c.result = ToolResultBlock(c.block.id, text, True)
            events.append(ToolCallFinished(c.block.id, c.block.name, "cancelled", summary,
                                           result=None if finished else c.result))
        if self.streaming is not None:
            events.append(ToolCallFinished(*self.streaming, "cancelled", f"not run: {why}"))
            self.streaming = None
        return events

    def _start(self, call: _Call) -> None:
        call.started = True
        self._running += 1
        self._idle = anyio.Event() if self._running == 1 else self._idle
        self.task_group.start_soon(self._run, call)

    async def _drain_queue(self) -> None:
        for call in self._queued:
            if call.safe:
                self._start(call)
                continue
            await self._idle.wait()
            self._start(call)
            await self._idle.wait()
        await self._idle.wait()
        self._done.set()

    async def _run(self, call: _Call) -> None:
        CURRENT_CALL.set(call.block.id)  # this task's context only
        try:
            with call.scope:  # `discard` cancels it, and has reported the call already
                status, content, summary, diff = await self._execute(call)
                if call.ignored and call.tool is not None:
                    content = f"{content}\n\n{ignored_note(call.tool, call.ignored)}"
                self._finish(call, status, content, summary, diff)
        except anyio.get_cancelled_exc_class():
            self._finish(call, "cancelled", "The tool call was cancelled by the user before "
                         "it finished; its effect is unknown.", "cancelled")
            raise
        except Exception as exc:  # a bug in a tool must not end the turn
            log.exception("tool %s failed", call.block.name)
            self._finish(call, "error", f"{call.block.name} failed: {type(exc).__name__}: {exc}",
                         f"failed: {exc}")
        finally:
            self._running -= 1
            if self._running == 0:
                self._idle.set()

    def _finish(self, call: _Call, status: str, content: str, summary: str,
                diff: str | None = None) -> None:
        if call.result is not None:  # discarded while it ran: reported then
            return
        # (a file name that is not UTF-8 must not make the result unsendable)
        content, summary = well_formed(content), well_formed(summary)
        diff = well_formed(diff) if diff is not None else None
        limit = call.tool.max_result_chars if call.tool else 10_000
        if len(content) > limit:
            content = budget_result(content, limit, self.ctx.results_dir, call.block.id)
        content = self._count(call, status, content)
        if call.note and status == "ok":
            content = f"{content}\n\n{call.note}"
        images = tuple(ImageBlock(ImageSource(kind, data)) for kind, data in call.images)
        text = content or ("" if images else "(no output)")
        call.result = ToolResultBlock(call.block.id, ((TextBlock(text),) if text else ()) + images
                                      if images else text, status != "ok")
        shown = "error" if status == "ok" and call.failed else status
        self.ctx.emit(ToolCallFinished(call.block.id, call.block.name, shown, summary, diff,
                                       call.result, *call.exit))

    def _count(self, call: _Call, status: str, content: str) -> str:
        """The repeat guard counts a call that ran; its result, with a warning when it
        completed a run of repetitions."""
        if call.refused or status == "cancelled" or not self.start.limits.on:
            return content
        name = call.block.name
        key = call_key(name, call.block.input)
        result = result_digest((content, len(call.images)), status != "ok")
        edited = status == "ok" and is_edit(name)
        call.outcome = Outcome(name, key, result, edited)
        _, found = after(self.start, name, key, result, edited)  # as if alone in its batch
        return content if found is None else content + warning(found, self.start.limits)

    async def _execute(self, call: _Call) -> tuple[str, str, str, str | None]:
        block, tool = call.block, call.tool
        found = call.loop
        if found is not None:
            call.refused = True
            self.ctx.emit(PermissionAnswered(block.id, "reject",
                                             reason=f"repeat guard: {describe(found)}"))
            return "rejected", refusal(found), f"not run: repeated {found.count} times", None
        if tool is None:
            names = ", ".join(sorted(self.tools))
            return "error", f"There is no tool named {block.name}. Tools: {names}.", "unknown tool", None
        if call.input_error:
            return "error", f"The input for {tool.name} was not valid JSON: {call.input_error}", "invalid input", None
        try:
            inp = self._validated(call, tool, block.input)
            verdict = await self._pre_hooks(tool, inp)
            if verdict.stop:
                self.stop_reason = verdict.stop
            if verdict.decision == "deny":
                self.ctx.emit(PermissionAnswered(block.id, "reject",
                                                 reason=f"PreToolUse hook: {verdict.reason}"))
                return ("rejected", f"A hook blocked this {tool.name} call: {verdict.reason}",
                        "blocked by a hook", None)
            if verdict.updated_input is not None:
                inp = self._validated(call, tool, verdict.updated_input, " (as a PreToolUse "
                                      "hook changed it)")
            decision = self.policy.decide(tool, inp, self.ctx, verdict.decision, verdict.reason)
            if isinstance(decision, Deny):
                self.ctx.emit(PermissionAnswered(block.id, "reject", reason=decision.message))
                return "rejected", decision.message, "denied", None
            review = None
            if isinstance(decision, Ask):
                rejected, review = await self._ask(block, tool, inp, decision)
                if rejected is not None:
                    return "rejected", rejected, "rejected", None
            if review is not None and isinstance(tool, ReviewedTool):
                output = await tool.run_reviewed(inp, self.ctx, review)
            else:
                output = await tool.run(inp, self.ctx)
            call.exit, call.failed = (output.exit_code, output.signal), output.failed
            call.images = output.images
        except _InvalidInput as exc:
            return "error", str(exc), f"invalid input: {exc.detail}", None
        except ToolError as exc:
            return "error", str(exc), str(exc), None
        content, is_error = output.content, output.is_error
        path = getattr(inp, "path", None) if tool.name in FILE_TOOLS else None
        if not is_error and isinstance(path, str) and self.ctx.on_file is not None:
            call.note = self.ctx.on_file(tool.name, Path(path))
        feedback = await self._post_hooks(tool, inp, content, is_error)
        if feedback is not None and feedback.stop:
            self.stop_reason = feedback.stop
        if feedback is not None:
            content = f"{content}\n\n[PostToolUse hook] {feedback.text}"
            is_error = is_error or feedback.block
        return ("error" if is_error else "ok"), content, output.summary, output.diff

    def _validated(self, call: _Call, tool: Tool, raw: Any, source: str = "") -> Any:
        """Convert (aliases taken, unknown fields dropped into `call.ignored`) and normalise;
        _InvalidInput (naming the field, and what it takes) or ToolError."""
        raw, call.ignored = accept(tool, raw)
        try:
            inp = msgspec.convert(raw, tool.input_type)
        except msgspec.ValidationError as exc:
            raise _InvalidInput(f"Invalid input for {tool.name}{source}: "
                                f"{explain(tool, str(exc))}", str(exc)) from None
        return tool.normalise(inp, self.ctx)

    def _hook_runner(self) -> HookRunner:
        return HookRunner(self.ctx.session_id, self.ctx.workspace, self.ctx.env or None,
                          self.ctx.output)

    async def _pre_hooks(self, tool: Tool, inp: Any) -> PreToolVerdict:
        hooks = self.policy.hooks.pre_tool_use
        if not any(h.matches(tool.name) for h in hooks):
            return PreToolVerdict()
        return await pre_tool_use(hooks, self._hook_runner(), tool.name,
                                  msgspec.to_builtins(inp), self.policy.mode)

    async def _post_hooks(self, tool: Tool, inp: Any, content: str,
                          is_error: bool) -> PostToolFeedback | None:
        hooks = self.policy.hooks.post_tool_use
        if not any(h.matches(tool.name) for h in hooks):
            return None
        return await post_tool_use(hooks, self._hook_runner(), tool.name,
                                   msgspec.to_builtins(inp), content, is_error)

    async def _ask(self, block: ToolUseBlock, tool: Tool, inp: Any,
                   ask: Ask) -> tuple[str | None, Review | None]:
        """Ask the editor: (None when allowed, else the message for the model; what the user
        chose to write instead of the proposal, if they reviewed it in part)."""
        async with self.permission_lock:  # one prompt at a time per session
            preview = await tool.preview(inp, self.ctx)
            title = one_line(tool.prompt_title(inp, self.ctx)
                             + (f" ({ask.note})" if ask.note else ""))
            self.ctx.emit(PermissionAsked(block.id, title, preview))
            self._asking.add(block.id)
            try:
                answer = await self.asker(PermissionPrompt(
                    block.id, tool.name, msgspec.to_builtins(inp), title, preview, ask.rule))
            except anyio.get_cancelled_exc_class():
                # the turn ends with the prompt open: it still gets its answer, before the
                # call's toolCallFinished (`discard` has given it one already)
                if block.id in self._asking:
                    self.ctx.emit(PermissionAnswered(block.id, "cancelled",
                                                     reason="the turn was cancelled"))
                raise
            finally:
                self._asking.discard(block.id)
            saved = scope = note = None
            if answer.decision == "allowAlways" and not ask.rule:
                note = f"allowed once: no rule is kept for this call ({ask.note})"
            elif answer.decision == "allowAlways":
                saved, scope, note = self._keep(answer.rule or ask.rule,
                                                answer.scope or "session")
            review = _review_of(preview, answer)
            self.ctx.emit(PermissionAnswered(
                block.id, answer.decision, saved, answer.reason or note, scope,
                hunks=review.decisions if review else answer.hunks,
                edited=bool(review and review.edited)))
        if isinstance(preview, PlanPreview):
            return self._planned(answer), None
        if answer.decision in ("allowOnce", "allowAlways"):
            return None, review
        if answer.message:
            return f"The user rejected this {tool.name} call and said: {answer.message}", None
        if answer.reason:
            return (f"This {tool.name} call did not run: {answer.reason}. Do not retry it; "
                    "tell the user what you wanted to do instead."), None
        return (f"The user rejected this {tool.name} call. Do not retry it; ask the user how to "
                "proceed if you need it."), None

    def _planned(self, answer: PermissionAnswer) -> str | None:
        """An answer to a plan: approved, the session goes on in the mode the user picked
        (never plan again) and the tool runs; else what the model reads."""
        if answer.decision == "reject":
            return plan_rejected(answer.message, answer.reason)
        if self.ctx.switch_mode is None:
            return plan_rejected(None, "this session cannot change its mode here")
        self.ctx.switch_mode(answer.mode if answer.mode not in (None, "plan") else "default")
        return None

    def _keep(self, rule: str, scope: RuleScope) -> tuple[str | None, RuleScope | None, str | None]:
        """Add an "allow always" rule: (the rule kept, its scope, a note when not as asked)."""
        try:
            kept = self.policy.add(Rule("allow", rule, scope))
        except RuleError as exc:
            return None, None, f"the rule was not saved ({exc}); allowed once"
        except SettingsWriteError as exc:
            log.warning("cannot save rule %s: %s", rule, exc)
            kept = self.policy.add(Rule("allow", rule, "session"))
            return kept.pattern, "session", f"kept for this session only: {exc}"
        return kept.pattern, scope, None


def _review_of(preview: Preview | None, answer: PermissionAnswer) -> Review | None:
    """What an allowing answer wants written instead of the proposal, if anything."""
    if (answer.decision == "reject" or not isinstance(preview, DiffPreview)
            or preview.before is None or preview.after is None):
        return None
    return review(preview.before, preview.after, preview.hunks, list(answer.hunks),
                  answer.final_text)


class _InvalidInput(Exception):
    def __init__(self, message: str, detail: str):
        super().__init__(message)
        self.detail = detail


@dataclass(frozen=True)
class Toolbox:
    """A turn's `ToolRunner`: its tools, what they run with, and how to ask the editor."""

    tools: dict[str, Tool]
    ctx: ToolContext
    asker: Asker
    permission_lock: anyio.Lock = field(default_factory=anyio.Lock)
    """One permission prompt at a time per session (sub-agents share their parent's)."""

    def schemas(self) -> tuple[dict[str, Any], ...]:
        return tuple(schema_of(t) for t in self.tools.values())

    def batch(self, task_group: anyio.abc.TaskGroup, permissions: PermissionDecider,
              repeats: Repeats | None = None) -> ToolExecutor:
        return ToolExecutor(self.tools, self.ctx, permissions, self.asker, task_group,
                            self.permission_lock,
                            start=repeats if repeats is not None else Repeats(RepeatLimits(0, 0)))
