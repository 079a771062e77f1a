"""Reading transcripts whose records came in orders a live daemon cannot be made to produce
on cue: events sent late (the editor was behind), older transcripts, damaged records."""

from __future__ import annotations

import json
from pathlib import Path

from heddle.core.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from heddle.sessions.transcript import INTERRUPTED_TEXT, Header, TranscriptWriter, read

HEADER = {"type": "header", "version": 1, "session_id": "a" * 32, "workspace": "/w",
          "model": "m", "created_at": 1.0}
READ = {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "/w/app.py"}}


def write(tmp_path: Path, records: list) -> Path:
    path = tmp_path / "t.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n"
                            for r in [HEADER] + records))
    return path


def event(turn: str, **ev) -> dict:
    return {"type": "event", "turnId": turn, "event": ev}


def message(turn: str, role: str, content: list, **extra) -> dict:
    return {"type": "message", "turnId": turn, "message": {"role": role, "content": content},
            **extra}


def text(t: str) -> dict:
    return {"type": "text", "text": t}


def roles(loaded) -> list[str]:
    return [m.role for m in loaded.messages]


def test_output_sent_after_its_message_became_final_is_not_kept_twice(tmp_path):
    """The editor was behind: the model call's message and its results were written before the
    call's last events were sent. The reply is already in the conversation."""
    path = write(tmp_path, [
        {"type": "turn", "turnId": "t", "prompt": "go", "at": 2.0},
        message("t", "user", [text("go")]),
        event("t", kind="turnStarted", prompt="go", model="m"),
        event("t", kind="modelCall", index=0, model="m"),
        message("t", "assistant", [text("Let me look."), READ], call=0),
        {"type": "toolResult", "turnId": "t", "status": "ok", "summary": "5 lines",
         "result": {"type": "tool_result", "tool_use_id": "toolu_1", "content": "code"}},
        message("t", "user", [{"type": "tool_result", "tool_use_id": "toolu_1",
                               "content": "code"}], call=0),
        event("t", kind="textDelta", text="Let me look."),
        event("t", kind="toolCallStarted", toolCallId="toolu_1", tool="Read"),
    ])
    loaded = read(path)
    assert roles(loaded) == ["user", "assistant", "user"]
    assert loaded.messages[2].content[-1].text == INTERRUPTED_TEXT
    assert loaded.warnings == []
    closing = [e for _, e in loaded.events[-2:]]
    assert [e["kind"] for e in closing] == ["toolCallFinished", "turnEnded"]
    assert (closing[0]["status"], closing[0]["summary"]) == ("ok", "5 lines")  # as it finished
    assert closing[1]["cancelPhase"] == "streaming"


def test_a_turn_an_older_heddle_left_open_is_closed_where_the_next_begins(tmp_path):
    path = write(tmp_path, [
        {"type": "turn", "turnId": "t1", "prompt": "go", "at": 2.0},
        message("t1", "user", [text("go")]),
        event("t1", kind="turnStarted", prompt="go", model="m"),
        event("t1", kind="modelCall", index=0, model="m"),
        event("t1", kind="textDelta", text="Partial answer"),
        event("t2", kind="turnStarted", prompt="next", model="m"),  # sent before it is recorded
        {"type": "turn", "turnId": "t2", "prompt": "next", "at": 3.0},
        message("t2", "user", [text("next")]),
        message("t2", "assistant", [text("Done.")]),
        event("t2", kind="turnEnded", reason="completed", usage={}),
        {"type": "end", "turnId": "t2", "reason": "completed", "at": 4.0},
    ])
    loaded = read(path)
    assert [(m.role, [getattr(b, "text", "") for b in m.content]) for m in loaded.messages] == [
        ("user", ["go"]), ("assistant", ["Partial answer"]),
        ("user", [INTERRUPTED_TEXT, "next"]), ("assistant", ["Done."])]
    assert (loaded.warnings, loaded.repairs, loaded.last_reason) == ([], [], "completed")
    assert [(t, e["kind"]) for t, e in loaded.events] == [
        ("t1", "turnStarted"), ("t1", "modelCall"), ("t1", "textDelta"), ("t1", "turnEnded"),
        ("t2", "turnStarted"), ("t2", "turnEnded")]


def test_damaged_records_are_skipped_and_the_rest_still_loads(tmp_path):
    path = write(tmp_path, [
        {"type": "turn", "turnId": "t", "prompt": "go", "at": 2.0},
        message("t", "user", [text("go")]),
        {"type": "toolResult", "turnId": "t", "result": "not a result"},
        {"type": "rules", "rules": [1]},
        {"type": "message", "turnId": "t", "message": "nothing"},
        ["not", "a", "record"],
        event("t", kind="usage", usage="lots"),
        event("t", kind="modelCall", index=[0], model="m"),
        event("t", kind="toolCallStarted", toolCallId="toolu_9", tool="Bash"),
        event("t", kind="toolCallInput", toolCallId="toolu_9", tool="Bash", input="rm", title=""),
        event("t", kind="agent", toolCallId=7, agent=None, event={"kind": "toolCallStarted"}),
        '{"type": "event", "turnId": "t", "ev',
    ])
    loaded = read(path)
    skipped = [w for w in loaded.warnings if w.startswith("skipped")]
    assert len(skipped) == 5 and skipped[-1].startswith("skipped the last line")
    assert roles(loaded) == ["user", "assistant", "user"]
    assert loaded.messages[1].content[0].input == {}  # what was not an input is not kept
    assert loaded.messages[2].content[0].tool_use_id == "toolu_9"
    assert [e["kind"] for _, e in loaded.events[-3:]] == ["toolCallFinished", "agent",
                                                          "turnEnded"]


def test_a_command_that_finished_before_its_event_was_sent_keeps_its_exit_status(tmp_path):
    """The editor was behind: Bash's result was written, its toolCallFinished was not yet sent.
    The repaired toolCallFinished says how the command ended, as the live one would have;
    the call that was still running gets no exit status (how it ended is unknown)."""
    path = tmp_path / "t.jsonl"
    w = TranscriptWriter(path, Header(1, "a" * 32, "/w", "m", 1.0))
    w.turn("t", "go")
    w.message("t", Message("user", (TextBlock("go"),)))
    w.event("t", {"kind": "turnStarted", "prompt": "go", "model": "m"})
    w.event("t", {"kind": "modelCall", "index": 0, "model": "m"})
    uses = (ToolUseBlock("toolu_1", "Bash", {"command": "exit 3"}),
            ToolUseBlock("toolu_2", "Bash", {"command": "sleep 30"}))
    w.message("t", Message("assistant", uses), call=0)
    for use in uses:
        w.event("t", {"kind": "toolCallStarted", "toolCallId": use.id, "tool": "Bash"})
    w.tool_result("t", ToolResultBlock("toolu_1", "Exit code 3"), "error", "exit 3", None,
                  exit_code=3)
    w.close()
    loaded = read(path)
    finished = {e["toolCallId"]: e for _, e in loaded.events if e["kind"] == "toolCallFinished"}
    assert finished["toolu_1"] == {"kind": "toolCallFinished", "toolCallId": "toolu_1",
                                   "tool": "Bash", "status": "error", "summary": "exit 3",
                                   "exitCode": 3}
    assert finished["toolu_2"] == {"kind": "toolCallFinished", "toolCallId": "toolu_2",
                                   "tool": "Bash", "status": "cancelled",
                                   "summary": "interrupted: Heddle stopped"}
    results = {b.tool_use_id: b for b in loaded.messages[2].content
               if isinstance(b, ToolResultBlock)}
    assert results["toolu_1"].content == "Exit code 3" and results["toolu_2"].is_error


def test_thinking_that_nothing_shown_follows_is_left_out_of_a_cut_off_reply(tmp_path):
    """The editor was behind: the thinking records are ahead of the events. A thinking block
    comes back only before something that was shown, never last (no reply may end in one)."""
    think = {"type": "thinking", "thinking": "plan", "signature": "s1"}
    later = {"type": "thinking", "thinking": "after the Read", "signature": "s2"}
    path = write(tmp_path, [
        {"type": "turn", "turnId": "t", "prompt": "go", "at": 2.0},
        message("t", "user", [text("go")]),
        event("t", kind="turnStarted", prompt="go", model="m"),
        event("t", kind="modelCall", index=0, model="m"),
        {"type": "thinking", "turnId": "t", "call": 0, "afterTools": 0, "block": think},
        {"type": "thinking", "turnId": "t", "call": 0, "afterTools": 1, "block": later},
        event("t", kind="thinkingDelta", text="plan"),
        event("t", kind="textDelta", text="Let me look."),
    ])
    loaded = read(path)
    assert [type(b).__name__ for b in loaded.messages[1].content] == ["ThinkingBlock", "TextBlock"]
    assert loaded.messages[1].content[0].signature == "s1"
