"""What `heddle ask` shows and reads on a terminal: the turn as it streams, permission
questions, and typed lines read by the event loop."""

from __future__ import annotations

import asyncio
import os
from typing import Any, TextIO


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

    def __init__(self, out: TextIO, color: bool):
        self.out = out
        self.color = color
        self.at_line_start = True
        self.titles: dict[str, str] = {}

    def _c(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def _line(self, text: str) -> None:
        self.end_line()
        self.out.write(text + "\n")
        self.at_line_start = True

    def end_line(self) -> None:
        """Finish the line being written, if any."""
        if not self.at_line_start:
            self.out.write("\n")
            self.out.flush()
            self.at_line_start = True

    def event(self, params: dict[str, Any]) -> None:
        ev = params.get("event", {})
        kind = ev.get("kind")
        if kind == "textDelta":
            self.out.write(ev["text"])
            self.at_line_start = ev["text"].endswith("\n")
        elif kind == "toolCallInput":
            self.titles[ev["toolCallId"]] = ev["title"]
            self._line(self._c("1;36", f"● {ev['title']}"))
        elif kind == "toolCallFinished":
            mark = {"ok": "└", "error": "✗", "rejected": "✗", "cancelled": "✗"}[ev["status"]]
            colour = "2" if ev["status"] == "ok" else "31"
            status, summary = ev["status"], ev["summary"]
            said = "" if status == "ok" else status if summary == status else f"{status}: "
            self._line(self._c(colour, f"  {mark} {said}{summary if summary != status else ''}"))
        elif kind == "permissionAnswered" and ev.get("reason"):
            self._line(self._c("33", f"  permission {ev['decision']}: {ev['reason']}"))
        elif kind == "retry":
            err = ev["error"]
            self._line(self._c("33", f"  retrying in {ev['delayMs'] / 1000:.1f} s "
                               f"(attempt {ev['attempt']}/{ev['maxAttempts']}): {err['message']}"))
        elif kind == "todo":
            marks = {"completed": "☒", "inProgress": "◐", "pending": "☐"}
            self._line(self._c("1", "Plan:"))
            for item in ev.get("todos", []):
                self._line(f"  {marks.get(item.get('status'), '☐')} {item.get('content', '')}")
        elif kind == "agent":
            inner = ev.get("event", {})
            if inner.get("kind") == "toolCallInput":
                self._line(self._c("36", f"    ↳ {inner['title']}"))
        elif kind == "modelFallback":
            self._line(self._c("33", f"  {ev['fromModel']} is overloaded; continuing with "
                               f"{ev['toModel']}"))
        elif kind == "compaction":
            self._line(self._c("2", f"  (context {ev['layer']}: {ev['tokensBefore']:,} -> "
                               f"{ev['tokensAfter']:,} tokens)"))
        self.out.flush()

    def diff(self, text: str) -> None:
        for line in text.splitlines():
            code = "32" if line.startswith("+") else "31" if line.startswith("-") else "2"
            self._line("    " + self._c(code, line))


def show_request(renderer: Renderer, params: dict[str, Any], heading: str) -> None:
    preview = params.get("preview") or {}
    renderer._line(renderer._c("1;33", f"{heading} {params['title']}"))
    if preview.get("kind") == "diff":
        renderer.diff(preview["diff"])
    elif preview.get("kind") == "command":
        renderer._line(f"    $ {preview['command']}    (in {preview['cwd']})")


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
    renderer._line(renderer._c("1;33", f"? Allow {params['title']}, hunk by hunk "
                               f"({len(hunks)} hunks)"))
    answers: list[dict[str, Any]] = []
    rest: str | None = None
    for n, hunk in enumerate(hunks, 1):
        if rest is None:
            renderer._line(renderer._c("1", f"  hunk {n} of {len(hunks)}"))
            renderer.diff(hunk["diff"])
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


async def ask_user(renderer: Renderer, stdin: TerminalLines, params: dict[str, Any]
                   ) -> dict[str, Any]:
    """Ask on the terminal (an edit of several hunks: hunk by hunk); the daemon withdrawing
    the request (the turn was cancelled) ends the question where it stands."""
    if len((params.get("preview") or {}).get("hunks") or []) > 1:
        try:
            return await ask_hunks(renderer, stdin, params)
        except asyncio.CancelledError:
            renderer.end_line()
            raise
    show_request(renderer, params, "? Allow")
    rule = next((o.get("rule") for o in params["options"] if o["decision"] == "allowAlways"), None)
    always = f"  [a] always allow {rule}" if rule else ""  # none for Heddle's own settings
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
