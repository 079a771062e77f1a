"""What `heddle ask` prints: text from the model, tools, files and the daemon cannot drive the
terminal; Heddle's own styling still does."""

from __future__ import annotations

import io
import re

from heddle.terminal import Renderer, clean, printable, show_request

HOSTILE = "\x1b]0;owned\x07\x1b[2J\x1b[1A\x1b[2K\r\x9b31m\x00"
OWN_STYLING = re.compile(r"\x1b\[[0-9;]*m|\x1b\[\d+F\x1b\[J")
"""The escapes Heddle writes itself: colours, and the redraw of live output."""


def rendered(events: list[dict], color: bool = True, live: bool = False) -> str:
    out = io.StringIO()
    renderer = Renderer(out, color=color, live=live)
    for ev in events:
        renderer.event({"event": ev})
    show_request(renderer, {"title": f"Write a{HOSTILE}.py", "preview": {
        "kind": "diff", "diff": f"--- a\n+++ b\n+safe\n+{HOSTILE}hidden\n"}}, "? Allow")
    show_request(renderer, {"title": "Bash", "preview": {
        "kind": "command", "command": f"echo {HOSTILE}", "cwd": f"/w{HOSTILE}"}}, "? Allow")
    return out.getvalue()


def every_kind() -> list[dict]:
    call = {"toolCallId": "c1"}
    return [
        {"kind": "textDelta", "text": f"Hello {HOSTILE} there\n"},
        {"kind": "toolCallInput", **call, "title": f"Read {HOSTILE}"},
        {"kind": "toolOutput", **call, "text": f"out {HOSTILE}\n"},
        {"kind": "toolCallFinished", **call, "status": "error", "summary": f"bad {HOSTILE}"},
        {"kind": "permissionAnswered", "decision": "reject", "reason": HOSTILE},
        {"kind": "retry", "delayMs": 1000, "attempt": 1, "maxAttempts": 3,
         "error": {"message": HOSTILE}},
        {"kind": "todo", "todos": [{"status": "pending", "content": HOSTILE}]},
        {"kind": "agent", "event": {"kind": "toolCallInput", "title": HOSTILE}},
        {"kind": "tombstone", "reason": HOSTILE},
        {"kind": "modelFallback", "fromModel": HOSTILE, "toModel": HOSTILE},
        {"kind": "compaction", "layer": HOSTILE, "tokensBefore": 2, "tokensAfter": 1},
    ]


def test_no_escape_from_any_event_or_request_reaches_the_terminal():
    for live in (False, True):
        shown = rendered(every_kind(), live=live)
        assert "\x1b[1;36m" in shown  # Heddle's own colours are still written
        left = OWN_STYLING.sub("", shown)
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", left), repr(left)
        assert "\\x1b]0;owned\\x07\\x1b[2J" in shown  # shown, visibly, not dropped
        assert "+\\x1b]0;owned" in shown  # the diff line that hid its content
    plain = rendered(every_kind(), color=False)
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", plain), repr(plain)


def test_clean_keeps_newlines_and_tabs_and_shows_the_rest():
    assert clean("a\tb\nc\r\nd") == "a\tb\nc\nd"
    assert clean("\x1b[2J\x07\x9b\x7f") == "\\x1b[2J\\x07\\x9b\\x7f"
    assert printable("red\x1b[31m!\x07") == "red!\\x07"  # a command's colours are dropped


def lines_of(events: list[dict], live: bool = False) -> list[str]:
    out = io.StringIO()
    renderer = Renderer(out, color=False, live=live)
    for ev in events:
        renderer.event({"event": ev})
    return out.getvalue().splitlines()


def title(call: str, text: str) -> dict:
    return {"kind": "toolCallInput", "toolCallId": call, "title": text}


def finished(call: str, summary: str, status: str = "ok") -> dict:
    return {"kind": "toolCallFinished", "toolCallId": call, "status": status, "summary": summary}


def test_a_result_away_from_its_title_says_which_call_it_is():
    for live in (False, True):
        assert lines_of([title("a", "Read a.py"), title("b", "Read b.py"),
                         finished("b", "2 lines"), finished("a", "1 line"),  # b's follows b
                         title("c", "Read c.py"), finished("c", "3 lines")], live) == [
            "● Read a.py", "● Read b.py", "  └ 2 lines", "  └ Read a.py: 1 line",
            "● Read c.py", "  └ 3 lines"]
    # output away from its title says whose it is, and keeps the result with it
    assert lines_of([title("a", "Run: x"), title("b", "Run: y"),
                     {"kind": "toolOutput", "toolCallId": "a", "text": "out\n"},
                     {"kind": "toolOutput", "toolCallId": "a", "text": "more\n"},
                     finished("a", "exit 3", "error"), finished("b", "exit 0")]) == [
        "● Run: x", "● Run: y", "  │ (output of Run: x)", "  │ out", "  │ more",
        "  ✗ error: exit 3", "  └ Run: y: exit 0"]
    assert lines_of([title("a", "Run: x"), {"kind": "toolOutput", "toolCallId": "a",
                                             "text": "out"}, finished("a", "exit 0")]) == [
        "● Run: x", "  │ out", "  └ exit 0"]


def test_a_title_stays_on_one_line():
    assert lines_of([title("a", "Write odd\nname.py"), finished("a", "wrote 1\nline")]) == [
        "● Write odd\\nname.py", "  └ wrote 1\\nline"]


def test_counts_agree_with_their_nouns():
    from heddle.ask import turn_summary
    usage = {"modelCalls": 1, "inputTokens": 10, "outputTokens": 3}
    assert turn_summary({"reason": "completed", "usage": usage}).startswith(
        "[completed · 1 model call · ")
    assert "· 2 model calls ·" in turn_summary({"reason": "completed",
                                                "usage": {**usage, "modelCalls": 2}})
    shown = lines_of([title("a", "Run: x"),
                      {"kind": "toolOutput", "toolCallId": "a", "text": "x\n", "elided": 1},
                      {"kind": "compaction", "layer": "snip", "tokensBefore": 9, "tokensAfter": 1}])
    assert "  │ [... 1 byte not shown ...]" in shown
    assert "  (context snip: 9 -> 1 token)" in shown


def test_thinking_goes_to_its_own_stream_dimmed_and_the_answer_is_not_mixed_with_it():
    out, thoughts = io.StringIO(), io.StringIO()
    renderer = Renderer(out, color=True, thoughts=thoughts, dim_thoughts=True)
    for ev in ({"kind": "textDelta", "text": "Let me see"},
               {"kind": "thinkingDelta", "text": f"first {HOSTILE}"},
               {"kind": "thinkingDelta", "text": " then"},
               {"kind": "toolCallInput", "toolCallId": "c1", "title": "Read app.py"},
               {"kind": "thinkingDelta", "text": "done"},
               {"kind": "textDelta", "text": "It greets.\n"}):
        renderer.event({"event": ev})
    renderer.end_line()
    assert out.getvalue() == "Let me see\n\x1b[1;36m● Read app.py\x1b[0m\nIt greets.\n"
    shown = thoughts.getvalue()
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", OWN_STYLING.sub("", shown))
    assert OWN_STYLING.sub("", shown) == (
        f"✻ thinking\nfirst {clean(HOSTILE)} then\n✻ thinking\ndone\n")
    assert shown.startswith("\x1b[2m✻ thinking\x1b[0m\n\x1b[2mfirst")  # dimmed
    # not dimmed where the stream is no terminal; nowhere without one
    plain = io.StringIO()
    renderer = Renderer(io.StringIO(), color=False, thoughts=plain)
    renderer.event({"event": {"kind": "thinkingDelta", "text": "hm"}})
    renderer.end_line()
    assert plain.getvalue() == "✻ thinking\nhm\n"
    assert lines_of([{"kind": "thinkingDelta", "text": "hm"}]) == []


def test_on_one_terminal_thinking_starts_on_a_line_of_its_own():
    screen = io.StringIO()  # stdout and stderr both the terminal
    renderer = Renderer(screen, color=False, thoughts=screen)
    for ev in ({"kind": "textDelta", "text": "Let me see"},
               {"kind": "thinkingDelta", "text": "hm"},
               {"kind": "textDelta", "text": "Yes."}):
        renderer.event({"event": ev})
    renderer.end_line()
    assert screen.getvalue() == "Let me see\n✻ thinking\nhm\nYes.\n"
