"""Heddle's turn events (as the LSP door sends and the transcript keeps them) → ACP
`session/update` payloads.

The ACP door reuses the LSP door's `TurnEmitter`, so text and thinking arrive here already
coalesced and live command output already bounded and paced; this module only renames. The
same translation replays a transcript for `session/load`, so a loaded session shows what a
live one showed.

ACP replaces a tool call's `content` as a whole on each update, so the translator keeps each
call's content (its diffs, and at most OUTPUT_CHARS of the newest live output) and sends all
of it. Every call it reported gets a final status: the core finishes each call, and a call
still open when its turn ends (a transcript cut by a crash) is reported `failed`.

A compaction that summarised the conversation is replayed as one `completed`
`compaction_update` at its place; live ones are reported by the compactor as they run
(`heddle.acp.agent`), so here live `compaction` events are not shown twice.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

KINDS = {"Read": "read", "Edit": "edit", "MultiEdit": "edit", "Write": "edit",
         "Bash": "execute", "Grep": "search", "Glob": "search", "LS": "search",
         "TodoWrite": "think", "Task": "think", "PresentPlan": "switch_mode"}
"""ACP's `ToolKind` for each built-in tool; any other tool is `other`."""
OUTPUT_CHARS = 32 * 1024
"""Newest characters of a call's live output shown in its tool call."""
STATUS = {"ok": "completed", "error": "failed", "rejected": "failed", "cancelled": "failed"}
SUMMARY_LAYERS = ("collapse", "auto", "reactive", "manual")
"""Compaction layers that summarise (and are shown as compactions); snip and microcompact only
trim old content, and are redone from the full history at each load."""
COMPACTION_KINDS = ("compaction_update", "compaction_summary_chunk")
"""Updates only a client that declared `session.compaction` is sent."""


def kind_of(tool: str) -> str:
    return KINDS.get(tool, "other")


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def compaction_update(compaction_id: str, status: str, summary: str = "", error: str = "",
                      tokens: tuple[int, int] | None = None) -> dict[str, Any]:
    """ACP's `compaction_update`: the summary only with `completed`, the error only with
    `failed` (as the spec asks); the token counts in `_meta.heddle`."""
    update: dict[str, Any] = {"sessionUpdate": "compaction_update",
                              "compactionId": compaction_id, "status": status}
    if status == "completed" and summary:
        update["summary"] = [text(summary)]
    if status == "failed" and error:
        update["error"] = error
    if tokens is not None:
        update["_meta"] = {"heddle": {"tokensBefore": tokens[0], "tokensAfter": tokens[1]}}
    return update


class _Call:
    __slots__ = ("tool", "diffs", "output", "elided", "terminal")

    def __init__(self, tool: str):
        self.tool = tool
        self.terminal: str | None = None
        """The client terminal the command runs in (`heddle.acp.terminal`)."""
        self.diffs: list[dict[str, Any]] = []
        self.output = ""
        self.elided = 0

    def content(self, note: str | None = None) -> list[dict[str, Any]]:
        items = [{"type": "terminal", "terminalId": self.terminal}] if self.terminal else []
        items += self.diffs
        if self.output:
            shown = (f"[… {self.elided} earlier characters not shown]\n" if self.elided
                     else "") + self.output
            items.append({"type": "content", "content": text(f"```\n{shown}\n```")})
        if note:
            items.append({"type": "content", "content": text(note)})
        return items


class Translator:
    """One session's events to ACP updates; keeps the tool calls of the running turn."""

    def __init__(self, workspace: Path, replay: bool = False):
        self.workspace = workspace
        self.replay = replay
        """Replaying a transcript: the prompts are shown too (live, the client sent them)."""
        self.calls: dict[str, _Call] = {}
        self.compactions = 0
        """Compactions replayed so far (their ids)."""

    def __call__(self, ev: dict[str, Any]) -> list[dict[str, Any]]:
        kind = ev.get("kind")
        if kind == "textDelta":
            return [{"sessionUpdate": "agent_message_chunk", "content": text(ev["text"])}]
        if kind == "thinkingDelta":
            return [{"sessionUpdate": "agent_thought_chunk", "content": text(ev["text"])}]
        if kind == "turnStarted":
            return [{"sessionUpdate": "user_message_chunk", "content": text(ev["prompt"])}
                    ] if self.replay else []
        if kind == "agent":  # a sub-agent: its tool calls are shown, its text is its answer
            inner = ev.get("event") or {}
            inner_kind = str(inner.get("kind", ""))
            return self(inner) if inner_kind.startswith("tool") or inner_kind == "compaction" \
                else []
        if kind == "compaction":  # live, the compactor reports them as they run (agent.py)
            return [self.compacted(ev.get("summary") or "", (ev.get("tokensBefore", 0),
                                                             ev.get("tokensAfter", 0)))
                    ] if self.replay and ev.get("layer") in SUMMARY_LAYERS else []
        if kind == "toolCallStarted":
            call_id, tool = ev["toolCallId"], ev["tool"]
            self.calls.setdefault(call_id, _Call(tool))
            return [{"sessionUpdate": "tool_call", "toolCallId": call_id, "title": tool,
                     "kind": kind_of(tool), "status": "pending"}]
        if kind == "toolCallInput":
            return [self._input(ev)]
        if kind == "toolOutput":
            return self._output(ev)
        if kind == "toolCallFinished":
            return self._finished(ev)
        if kind == "todo":
            return [{"sessionUpdate": "plan", "entries": [
                {"content": t["content"], "priority": "medium",
                 "status": "in_progress" if t["status"] == "inProgress" else t["status"]}
                for t in ev["todos"]]}]
        if kind == "usage" and ev.get("contextWindow"):
            return [{"sessionUpdate": "usage_update", "used": ev.get("contextTokens", 0),
                     "size": ev["contextWindow"]}]
        if kind == "modeChanged":  # an approved plan: the session goes on in the chosen mode
            return [{"sessionUpdate": "current_mode_update", "currentModeId": ev["mode"]}]
        if kind == "loopDetected":  # a notice of its own, between the answer's pieces
            return [{"sessionUpdate": "agent_message_chunk",
                     "content": text(f"\n\n**Heddle is repeating itself: "
                                     f"{ev.get('description', '')}.**\n\n"),
                     "_meta": {"heddle": {"loopDetected": ev}}}]
        if kind == "turnEnded":
            ended = (ev.get("error") or {}).get("message") if ev.get("reason") == "loopDetected" \
                else None
            return ([{"sessionUpdate": "agent_message_chunk",
                      "content": text(f"**The turn ended: {ended}.**\n")}]
                    if ended else []) + self.close()
        return []

    def compacted(self, summary: str, tokens: tuple[int, int] | None = None) -> dict[str, Any]:
        """A replayed compaction, at its place in the timeline: one `completed` update."""
        self.compactions += 1
        return compaction_update(f"replay-{self.compactions}", "completed", summary,
                                 tokens=tokens)

    def terminal(self, call_id: str, terminal_id: str) -> dict[str, Any]:
        """The update that embeds a client terminal in its call."""
        call = self.calls.setdefault(call_id, _Call("Bash"))
        call.terminal = terminal_id
        return {"sessionUpdate": "tool_call_update", "toolCallId": call_id,
                "content": call.content()}

    def close(self) -> list[dict[str, Any]]:
        """Final `failed` updates for the calls still open (the turn is over)."""
        updates = [{"sessionUpdate": "tool_call_update", "toolCallId": call_id,
                    "status": "failed", "content": call.content("The call did not finish.")}
                   for call_id, call in self.calls.items()]
        self.calls.clear()
        return updates

    def path(self, raw: Any) -> str | None:
        if not isinstance(raw, str) or not raw:
            return None
        return os.path.normpath(raw if os.path.isabs(raw) else self.workspace / raw)

    def _input(self, ev: dict[str, Any]) -> dict[str, Any]:
        call_id, tool, inp = ev["toolCallId"], ev["tool"], ev.get("input") or {}
        call = self.calls.setdefault(call_id, _Call(tool))
        update: dict[str, Any] = {"sessionUpdate": "tool_call_update", "toolCallId": call_id,
                                  "title": ev.get("title") or tool, "kind": kind_of(tool),
                                  "status": "in_progress", "rawInput": inp}
        path = self.path(inp.get("path", inp.get("file_path")))  # the model may use either
        if path is not None:
            location: dict[str, Any] = {"path": path}
            if tool == "Read" and isinstance(inp.get("offset"), int):
                location["line"] = inp["offset"]
            update["locations"] = [location]
            call.diffs = diffs(tool, path, inp)
            if call.diffs:
                update["content"] = call.content()
        return update

    def _output(self, ev: dict[str, Any]) -> list[dict[str, Any]]:
        call = self.calls.get(ev.get("toolCallId", ""))
        if call is None:  # a Stop hook's output: no call to show it under
            return []
        call.elided += ev.get("elided") or 0
        call.output += ev.get("text", "")
        if len(call.output) > OUTPUT_CHARS:
            cut = len(call.output) - OUTPUT_CHARS
            call.elided += cut
            call.output = call.output[cut:]
        return [{"sessionUpdate": "tool_call_update", "toolCallId": ev["toolCallId"],
                 "content": call.content()}]

    def _finished(self, ev: dict[str, Any]) -> list[dict[str, Any]]:
        call_id, status = ev["toolCallId"], ev["status"]
        call = self.calls.pop(call_id, None) or _Call(ev["tool"])
        summary = ev.get("summary") or ""
        note = None if status == "ok" and (call.diffs or call.output) else (
            summary if status == "ok" else f"{status}: {summary}" if summary else status)
        raw = {"status": status, "summary": summary}
        for key in ("exitCode", "signal"):
            if ev.get(key) is not None:
                raw[key] = ev[key]
        return [{"sessionUpdate": "tool_call_update", "toolCallId": call_id,
                 "status": STATUS.get(status, "failed"), "content": call.content(note),
                 "rawOutput": raw}]


def diffs(tool: str, path: str, inp: dict[str, Any]) -> list[dict[str, Any]]:
    """The `diff` items an edit's input proposes (the changed text, not the whole file)."""
    if tool == "Write" and isinstance(inp.get("content"), str):
        return [{"type": "diff", "path": path, "newText": inp["content"]}]  # no oldText: new
    if tool == "Edit":
        edits = [inp]
    elif tool == "MultiEdit" and isinstance(inp.get("edits"), list):
        edits = inp["edits"]
    else:
        return []
    return [{"type": "diff", "path": path, "newText": e["new_string"],
             **({"oldText": e["old_string"]} if e.get("old_string") else {})} for e in edits
            if isinstance(e, dict) and isinstance(e.get("new_string"), str)]
