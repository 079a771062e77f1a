"""What `heddle ask` shows and reads on a terminal: the turn as it streams, permission
questions, and typed lines read by the event loop."""

from __future__ import annotations

import asyncio
import collections
import os
import re
import shutil
from typing import Any, TextIO

from heddle.words import plural

LIVE_LINES = 4
"""Lines of a running command's output shown under it on a terminal (the newest)."""
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CONTROLS_AND_NEWLINE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def _shown(match: re.Match[str]) -> str:
    char = match.group()
    return "\\n" if char == "\n" else f"\\x{ord(char):02x}"


def clean(text: object, one_line: bool = False) -> str:
    """Text from the model, a tool, a file or the daemon, safe to print: every control
    character but newline and tab is shown as an escape (ESC as `\\x1b`), so it cannot move
    the cursor, rewrite what is on the screen or set the window title. `one_line`: a newline
    is shown as `\\n` too (a title stays on its line). The one way such text reaches the
    terminal; Heddle's own styling is added around it afterwards."""
    text = str(text).replace("\r\n", "\n")
    return (_CONTROLS_AND_NEWLINE if one_line else _CONTROLS).sub(_shown, text)


def printable(line: str) -> str:
    """A line of command output as plain text: what a carriage return overwrote is gone,
    terminal escapes (colours, mostly) are dropped and other control characters shown as
    `clean` shows them."""
    line = line.rsplit("\r", 1)[-1] if "\r" in line.rstrip("\r") else line.rstrip("\r")
    return clean(_ESCAPES.sub("", line)).expandtabs(4)


class Stdout:
    """Where `heddle ask` prints the turn, until nobody reads it: a write to a closed pipe
    (`heddle ask ... | head -1`) sets `gone`, and what follows goes to /dev/null, so neither
    the printing nor Python's flush at exit fails."""

    def __init__(self, out: TextIO):
        self.out = out
        self.gone = asyncio.Event()

    def _guarded(self, action: Any, *args: Any) -> Any:
        if self.gone.is_set():
            return None
        try:
            return action(*args)
        except BrokenPipeError:
            self.gone.set()
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:  # what is still buffered is flushed there, not to the closed pipe
                os.dup2(devnull, self.out.fileno())
            finally:
                os.close(devnull)
            return None

    def write(self, text: str) -> None:
        self._guarded(self.out.write, text)

    def flush(self) -> None:
        self._guarded(self.out.flush)

    def isatty(self) -> bool:
        return self.out.isatty()


class _Output:
    """A command's output as `Renderer` shows it: the newest lines, and how many there were."""

    def __init__(self) -> None:
        self.tail: collections.deque[str] = collections.deque(maxlen=LIVE_LINES)
        self.partial = ""
        self.lines = 0

    def feed(self, text: str, elided: int) -> list[str]:
        """The lines `text` completes (an elision is a line of its own)."""
        done = []
        if elided:
            if self.partial:
                done.append(self.partial)
                self.partial = ""
            done.append(f"[... {plural(elided, 'byte')} not shown ...]")
        *complete, self.partial = (self.partial + text).split("\n")
        done += complete
        done = [printable(line) for line in done]
        self.tail.extend(done)
        self.lines += len(done)
        return done

    def rest(self) -> str | None:
        """The unfinished last line, once the command has ended."""
        if not self.partial:
            return None
        line, self.partial = printable(self.partial), ""
        self.tail.append(line)
        self.lines += 1
        return line


class TerminalLines:
    """Lines typed on the terminal, read by the event loop when the terminal has some.

    Not a thread blocked in `readline`: one would keep `heddle ask` from exiting after the
    turn ended (a Ctrl-C at the question) until the user pressed Enter.
    """

    def __init__(self, fd: int = 0):
        self.fd = fd
        self._buffer = b""
        self._eof = False

    async def readline(self) -> str:
        """The next line with its newline; "" at end of input."""
        loop = asyncio.get_running_loop()
        while b"\n" not in self._buffer and not self._eof:
            ready = loop.create_future()
            loop.add_reader(self.fd, lambda: ready.done() or ready.set_result(None))
            try:
                await ready
            finally:
                loop.remove_reader(self.fd)
            chunk = os.read(self.fd, 4096)  # readable: returns at once
            self._eof = not chunk
            self._buffer += chunk
        line, newline, self._buffer = self._buffer.partition(b"\n")
        return (line + newline).decode(errors="replace")


class Renderer:
    """Prints a turn's events to a terminal: text as it streams, tools on their own lines."""

    def __init__(self, out: TextIO, color: bool, live: bool = False,
                 thoughts: TextIO | None = None, dim_thoughts: bool = False):
        self.out = out
        self.color = color
        self.live = live
        self.thoughts = thoughts
        """Where the model's thinking goes (stderr: it is not the answer); None: nowhere."""
        self.dim_thoughts = dim_thoughts
        self.thinking = False
        """Thinking is being written to `thoughts`, on a line not yet ended."""
        """A terminal: a running command's newest lines are redrawn in place, then folded
        away. Otherwise each line of output is printed once, as it completes."""
        self.at_line_start = True
        self.titles: dict[str, str] = {}
        self.outputs: dict[str, _Output] = {}
        self.drawn = 0
        """Lines of live output at the bottom of the screen (0: none)."""
        self.drawn_for: str | None = None
        self.last_call: str | None = None
        """The tool call the last line printed belongs to (its title or output), if any."""

    def _c(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def _line(self, text: str, call: str | None = None) -> None:
        self.end_line()
        self.out.write(text + "\n")
        self.at_line_start = True
        self.drawn, self.drawn_for = 0, None  # live output above stays as it is
        self.last_call = call

    def _output(self, ev: dict[str, Any]) -> None:
        call = ev.get("toolCallId", "")
        shown = self.outputs.setdefault(call, _Output())
        done = shown.feed(str(ev.get("text", "")), int(ev.get("elided") or 0))
        if not self.live:
            for line in done:
                self._plain_output(call, line)
            return
        self._draw(call, shown)

    def _plain_output(self, call: str, line: str) -> None:
        """A line of output into a pipe; away from its call's title, after one naming it."""
        if self.last_call != call:
            self._line(f"  │ (output of {self.titles.get(call, call)})", call)
        self._line(f"  │ {line}", call)

    def _draw(self, call: str, shown: _Output) -> None:
        """Redraw the newest lines of `call`'s output at the bottom of the screen."""
        if self.drawn_for != call:
            self.end_line()
            self.drawn = 0
        self._erase()
        width = max(20, shutil.get_terminal_size().columns - 5)
        lines = list(shown.tail) + ([printable(shown.partial)] if shown.partial else [])
        for line in lines[-LIVE_LINES:]:
            self.out.write(self._c("2", f"  │ {line[:width]}") + "\n")
        self.drawn, self.drawn_for = len(lines[-LIVE_LINES:]), call
        self.last_call = call

    def _erase(self) -> None:
        if self.drawn:
            self.out.write(f"\x1b[{self.drawn}F\x1b[J")  # up to the first drawn line, clear
            self.drawn = 0

    def _finished(self, call: str, ok: bool) -> None:
        """The call ended: fold its live output away (a failure's last lines stay)."""
        shown = self.outputs.pop(call, None)
        if shown is None:
            return
        rest = shown.rest()
        if not self.live:
            if rest is not None:
                self._plain_output(call, rest)
            return
        if self.drawn_for == call:
            if ok:
                self._erase()
                self._line(self._c("2", f"  │ ({plural(shown.lines, 'line')} of output)"),
                           call)
            elif rest is not None:
                self._draw(call, shown)
        elif rest is not None:
            self._line(self._c("2", f"  │ {rest}"), call)

    def _think(self, text: str) -> None:
        """Streamed thinking, dimmed, after a `✻ thinking` line; on its own stream, so the
        answer's line is ended first (both may be the same terminal)."""
        if self.thoughts is None:
            return
        self._end_answer_line()
        dim = (lambda s: f"\x1b[2m{s}\x1b[0m") if self.dim_thoughts else (lambda s: s)
        if not self.thinking:
            self.thoughts.write(dim("✻ thinking") + "\n")
            self.thinking = True
        self.thoughts.write(dim(clean(text)))
        self.thoughts.flush()
        self.drawn, self.drawn_for, self.last_call = 0, None, None  # live output stays above

    def _end_thought(self) -> None:
        if self.thinking:
            self.thinking = False
            self.thoughts.write("\n")
            self.thoughts.flush()

    def end_line(self) -> None:
        """Finish the line being written, if any."""
        self._end_thought()
        self._end_answer_line()

    def _end_answer_line(self) -> None:
        if not self.at_line_start:
            self.out.write("\n")
            self.out.flush()
            self.at_line_start = True

    def event(self, params: dict[str, Any]) -> None:
        ev = params.get("event", {})
        kind = ev.get("kind")
        if kind == "thinkingDelta":
            self._think(str(ev.get("text", "")))
            return
        self._end_thought()
        if kind == "textDelta":
            text = clean(ev["text"])
            self.out.write(text)
            self.at_line_start = text.endswith("\n")
            self.drawn, self.drawn_for, self.last_call = 0, None, None
        elif kind == "toolCallInput":
            self.titles[ev["toolCallId"]] = title = clean(ev["title"], one_line=True)
            self._line(self._c("1;36", f"● {title}"), ev["toolCallId"])
        elif kind == "toolOutput":
            self._output(ev)
        elif kind == "toolCallFinished":
            call = ev["toolCallId"]
            self._finished(call, ev["status"] == "ok")
            # calls run side by side: a result away from its title says whose it is
            whose = "" if self.last_call == call else f"{self.titles.get(call, call)}: "
            mark = {"ok": "└", "error": "✗", "rejected": "✗", "cancelled": "✗"}[ev["status"]]
            colour = "2" if ev["status"] == "ok" else "31"
            status, summary = ev["status"], clean(ev["summary"], one_line=True)
            said = "" if status == "ok" else status if summary == status else f"{status}: "
            self._line(self._c(colour, f"  {mark} {whose}{said}"
                                       f"{summary if summary != status else ''}"), call)
        elif kind == "loopDetected":
            self._line(self._c("1;33", f"  ⟳ repeating itself: "
                                       f"{clean(ev['description'], one_line=True)}"),
                       ev.get("toolCallId"))
        elif kind == "permissionAnswered" and ev.get("reason"):
            self._line(self._c("33", f"  permission {clean(ev['decision'])}: "
                               f"{clean(ev['reason'])}"), ev.get("toolCallId"))
        elif kind == "retry":
            err = ev["error"]
            self._line(self._c("33", f"  retrying in {ev['delayMs'] / 1000:.1f} s "
                               f"(attempt {ev['attempt']}/{ev['maxAttempts']}): {clean(err['message'])}"))
        elif kind == "todo":
            marks = {"completed": "☒", "inProgress": "◐", "pending": "☐"}
            self._line(self._c("1", "Plan:"))
            for item in ev.get("todos", []):
                self._line(f"  {marks.get(item.get('status'), '☐')} {clean(item.get('content', ''))}")
        elif kind == "agent":
            inner = ev.get("event", {})
            if inner.get("kind") == "toolCallInput":
                self._line(self._c("36", f"    ↳ {clean(inner['title'], one_line=True)}"))
        elif kind == "tombstone":  # printed text cannot be taken back: say it is void
            self._line(self._c("33", f"  ↺ the answer above is discarded: {clean(ev['reason'])}"))
        elif kind == "modelFallback":
            self._line(self._c("33", f"  {clean(ev['fromModel'])} is overloaded; continuing "
                               f"with {clean(ev['toModel'])}"))
        elif kind == "modeChanged":
            self._line(self._c("1;32", f"  plan approved: mode {clean(ev['mode'])} from now on"))
        elif kind == "compaction":
            self._line(self._c("2", f"  (context {clean(ev['layer'])}: {ev['tokensBefore']:,} -> "
                               f"{plural(ev['tokensAfter'], 'token')})"))
        self.out.flush()

    def diff(self, text: str, call: str | None = None) -> None:
        for line in clean(text).splitlines():
            code = "32" if line.startswith("+") else "31" if line.startswith("-") else "2"
            self._line("    " + self._c(code, line), call)


def show_request(renderer: Renderer, params: dict[str, Any], heading: str) -> None:
    preview, call = params.get("preview") or {}, params.get("toolCallId")
    renderer._line(renderer._c("1;33", f"{heading} {clean(params['title'], one_line=True)}"),
                   call)
    if preview.get("kind") == "diff":
        renderer.diff(preview["diff"], call)
    elif preview.get("kind") == "command":
        renderer._line(f"    $ {clean(preview['command'])}    "
                       f"(in {clean(preview['cwd'], one_line=True)})", call)
    elif preview.get("kind") == "plan":
        for line in clean(preview["plan"]).splitlines():
            renderer._line(f"    {line}", call)


async def _prompt(renderer: Renderer, stdin: TerminalLines, question: str) -> str:
    """The line typed after `question` ("" at end of input)."""
    renderer.out.write(question)
    renderer.out.flush()
    renderer.at_line_start = False
    line = await stdin.readline()
    renderer.at_line_start = True
    return line


async def ask_hunks(renderer: Renderer, stdin: TerminalLines, params: dict[str, Any]
                    ) -> dict[str, Any]:
    """Ask about an edit hunk by hunk, as `git add -p` does: y/n per hunk (n: then an optional
    message), a: this hunk and the rest, d: none of this one and the rest. End of input
    rejects the whole call."""
    hunks = params["preview"]["hunks"]
    title, call = clean(params["title"], one_line=True), params.get("toolCallId")
    renderer._line(renderer._c("1;33", f"? Allow {title}, hunk by hunk "
                               f"({plural(len(hunks), 'hunk')})"), call)
    answers: list[dict[str, Any]] = []
    rest: str | None = None
    for n, hunk in enumerate(hunks, 1):
        if rest is None:
            renderer._line(renderer._c("1", f"  hunk {n} of {len(hunks)}"), call)
            renderer.diff(hunk["diff"], call)
        while rest is None:
            line = await _prompt(renderer, stdin, "  apply this hunk? [y] yes  [n] no  "
                                 "[a] this and the rest  [d] none of this or the rest > ")
            if not line:
                return {"decision": "reject"}
            choice = line.strip().lower()
            if choice in ("y", "n", "a", "d"):
                break
        if rest is not None or choice in ("a", "d"):
            rest = rest or ("accept" if choice == "a" else "reject")
            answers.append({"index": hunk["index"], "decision": rest})
        elif choice == "y":
            answers.append({"index": hunk["index"], "decision": "accept"})
        else:
            message = (await _prompt(renderer, stdin,
                                     "  message for the agent (optional) > ")).strip()
            answers.append({"index": hunk["index"], "decision": "reject",
                            **({"message": message} if message else {})})
    rejected = [a for a in answers if a["decision"] == "reject"]
    return {"decision": "allowOnce", **({"hunks": rejected} if rejected else {})}


PLAN_KEYS = {"default": ("y", "approve"), "acceptEdits": ("e", "approve, accept edits")}


async def ask_plan(renderer: Renderer, stdin: TerminalLines, params: dict[str, Any]
                   ) -> dict[str, Any]:
    """Show the plan and ask: approve it in one of the modes its options offer, or keep
    planning with an optional message. End of input keeps planning."""
    show_request(renderer, params, "? Approve the plan:")
    modes = [o["mode"] for o in params["options"]
             if o["decision"] != "reject" and o.get("mode") in PLAN_KEYS]
    keys = "  ".join(f"[{PLAN_KEYS[m][0]}] {PLAN_KEYS[m][1]}" for m in modes)
    while True:
        line = await _prompt(renderer, stdin, f"  {keys}  [n] keep planning > ")
        choice = line.strip().lower()
        if not line or choice in ("n", "no"):
            message = (await _prompt(renderer, stdin, "  what should change? (optional) > ")
                       ).strip() if line else ""
            return {"decision": "reject", **({"message": message} if message else {})}
        mode = next((m for m in modes if choice == PLAN_KEYS[m][0]), None)
        if mode is not None:
            return {"decision": "allowOnce", "mode": mode}


async def ask_loop(renderer: Renderer, stdin: TerminalLines, params: dict[str, Any]
                   ) -> dict[str, Any]:
    """The repeat guard's question (`loop: true`): go on, or stop the turn (also at the end
    of input)."""
    show_request(renderer, params, "?")
    try:
        while True:
            choice = (await _prompt(renderer, stdin, "  [y] let it go on  [n] stop the turn > "))
            if not choice or choice.strip().lower() in ("n", "no", "stop"):
                return {"decision": "reject"}
            if choice.strip().lower() in ("y", "yes"):
                return {"decision": "allowOnce"}
    except asyncio.CancelledError:
        renderer.end_line()
        raise


async def ask_user(renderer: Renderer, stdin: TerminalLines, params: dict[str, Any]
                   ) -> dict[str, Any]:
    """Ask on the terminal (an edit of several hunks: hunk by hunk; a plan: approve it in a
    mode, or not); the daemon withdrawing the request (the turn was cancelled) ends the
    question where it stands."""
    special = (ask_hunks if len((params.get("preview") or {}).get("hunks") or []) > 1
               else ask_plan if (params.get("preview") or {}).get("kind") == "plan" else None)
    if special is not None:
        try:
            return await special(renderer, stdin, params)
        except asyncio.CancelledError:
            renderer.end_line()
            raise
    show_request(renderer, params, "? Allow")
    rule = next((o.get("rule") for o in params["options"] if o["decision"] == "allowAlways"), None)
    always = f"  [a] always allow {clean(rule, one_line=True)}" if rule else ""  # none for Heddle's own settings
    question = f"  [y] allow once{always}  [n] reject > "
    try:
        while True:
            renderer.out.write(question)
            renderer.out.flush()
            renderer.at_line_start = False
            line = await stdin.readline()
            renderer.at_line_start = True
            choice = line.strip().lower()
            if not line or choice in ("n", "no", "reject"):
                message = ""
                if line:
                    renderer.out.write("  message for the agent (optional) > ")
                    renderer.out.flush()
                    renderer.at_line_start = False
                    message = (await stdin.readline()).strip()
                    renderer.at_line_start = True
                return {"decision": "reject", **({"message": message} if message else {})}
            if choice in ("y", "yes"):
                return {"decision": "allowOnce"}
            if rule and choice in ("a", "always"):
                return {"decision": "allowAlways", "rule": rule}
    except asyncio.CancelledError:
        renderer.end_line()  # leave the unanswered question on a line of its own
        raise
