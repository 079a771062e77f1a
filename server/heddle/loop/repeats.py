"""The repeat guard: the same tool call, or the same short cycle of calls (A, B, A, B, ...),
made again and again within a turn with the same results.

Pure functions over a frozen `Repeats` value that the loop state carries from one model
response to the next. A call is counted as it finishes, with a digest of its result; what it
is compared on is its tool and its input in canonical form (key order and JSON whitespace do
not matter). Only unbroken repetition counts:

- a call, or cycle, whose result differs from the time before breaks the run;
- a successful file edit (`Write`, `Edit`, `MultiEdit`) starts the count afresh, unless it
  repeats the edit just before it (re-running the tests after an edit is no loop);
- the user letting a caught turn go on starts it afresh too.

The calls of one model response are judged against what the responses before them did, each
as if it were the response's only call (they run in parallel, and the model had seen none of
their results), so the verdicts do not depend on which finishes first; the response's calls
then join the count in request order, the same call with the same result twice in a row
counting once.

At `warn_at` repetitions the result of the call that completes them gets a warning; from
`stop_at` a call that would repeat the run again is refused before it runs (the loop step
then asks the user whether the turn may go on). 0 turns either off.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Sequence

from heddle.rules import EDIT_TOOLS
from heddle.settings import LoopSettings

MAX_CYCLE = 4
"""The longest cycle of different calls looked for."""


@dataclass(frozen=True)
class RepeatLimits:
    warn_at: int = 3
    """Repetitions at which the result gets a warning; 0: never."""
    stop_at: int = 4
    """Repetitions from which the call does not run; 0: never."""
    max_cycle: int = MAX_CYCLE

    @classmethod
    def from_settings(cls, settings: LoopSettings | None) -> RepeatLimits:
        """The `[loop]` settings' limits, the defaults where one is not set."""
        if settings is None:
            return cls()
        default = cls()
        return cls(default.warn_at if settings.warn_at is None else settings.warn_at,
                   default.stop_at if settings.stop_at is None else settings.stop_at)

    @property
    def on(self) -> bool:
        return bool(self.warn_at or self.stop_at)

    @property
    def kept(self) -> int:
        """Calls of history that can matter: the longest run that is looked for."""
        return max(self.warn_at, self.stop_at) * self.max_cycle


@dataclass(frozen=True)
class Seen:
    """One finished call: what it was and what it returned."""

    tool: str
    key: str
    result: str


@dataclass(frozen=True)
class Repeats:
    """The guard's state: its limits and the recent calls of the turn that still count."""

    limits: RepeatLimits = RepeatLimits()
    seen: tuple[Seen, ...] = ()


@dataclass(frozen=True)
class Loop:
    """A repetition found: the cycle's tools in call order (one for the same call repeated),
    and how many times it has been made with the same results (the refused one included)."""

    tools: tuple[str, ...]
    count: int

    @property
    def cycle(self) -> int:
        return len(self.tools)


@dataclass(frozen=True)
class Outcome:
    """One call of a response that ran: what `after` counts once the response has ended."""

    tool: str
    key: str
    result: str
    edited: bool


def call_key(tool: str, inp: Any) -> str:
    """The call in canonical form: the same for inputs that differ only in key order."""
    return json.dumps([tool, inp], sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=repr)


def result_digest(content: Any, is_error: bool) -> str:
    text = content if isinstance(content, str) else repr(content)
    return hashlib.sha256(f"{int(is_error)}:{text}".encode("utf-8", "replace")).hexdigest()


def before(repeats: Repeats, tool: str, key: str) -> Loop | None:
    """The run this call would repeat once more, when that reaches `stop_at` (it must not
    run); None: it may run."""
    limits, seen = repeats.limits, repeats.seen
    if not limits.stop_at:
        return None
    for period in range(1, limits.max_cycle + 1):
        if len(seen) < period or seen[-period].key != key:
            continue
        cycle = seen[-period:]
        if _shorter_period(cycle):
            continue
        times = _times(seen, period)
        if times + 1 >= limits.stop_at:
            return Loop(_tools(seen[-period:], 0), times + 1)
    return None


def after(repeats: Repeats, tool: str, key: str, result: str, edited: bool
          ) -> tuple[Repeats, Loop | None]:
    """Count a finished call; the run it completes, when that reached `warn_at` (its result
    gets a warning). `edited`: it was a file edit that succeeded."""
    limits = repeats.limits
    if not limits.on:
        return repeats, None
    entry = Seen(tool, key, result)
    seen = repeats.seen
    if edited and (not seen or seen[-1] != entry):
        seen = ()
    seen = (seen + (entry,))[-limits.kept:]
    new = Repeats(limits, seen)
    if not limits.warn_at:
        return new, None
    for period in range(1, limits.max_cycle + 1):
        if len(seen) < period * 2 or _shorter_period(seen[-period:]):
            continue
        times = _times(seen, period)
        if times >= limits.warn_at:
            return new, Loop(_tools(seen[-period:], 0), times)
    return new, None


def refused(repeats: Repeats, loop: Loop) -> Repeats:
    """A refused call counts as made once more with the same result, so that the rest of its
    cycle, and the call again, are refused too (with a count that goes on)."""
    return Repeats(repeats.limits, (repeats.seen + (repeats.seen[-loop.cycle],))[
        -repeats.limits.kept:])


def after_response(start: Repeats, calls: Sequence[Outcome | Loop]) -> Repeats:
    """The count once a response's calls have ended: each that ran (`Outcome`) or was
    refused (`Loop`), in request order."""
    repeats, last = start, None
    for call in calls:
        if isinstance(call, Loop):
            repeats, last = refused(repeats, call), None
        elif call != last:
            repeats, last = after(repeats, call.tool, call.key, call.result, call.edited)[0], call
    return repeats


def reset(repeats: Repeats) -> Repeats:
    """The user let the turn go on: counting starts again."""
    return Repeats(repeats.limits)


def is_edit(tool: str) -> bool:
    return tool in EDIT_TOOLS


def _times(seen: tuple[Seen, ...], period: int) -> int:
    """How many times the last `period` calls were made in a row, each with the same
    results."""
    tail = seen[-period:]
    times = 1
    while len(seen) >= (times + 1) * period and \
            seen[len(seen) - (times + 1) * period:len(seen) - times * period] == tail:
        times += 1
    return times


def _shorter_period(cycle: tuple[Seen, ...]) -> bool:
    """Whether the cycle is a shorter one repeated (A, A or A, B, A, B)."""
    n = len(cycle)
    return any(n % d == 0 and cycle == cycle[:d] * (n // d) for d in range(1, n))


def _tools(cycle: tuple[Seen, ...], start: int) -> tuple[str, ...]:
    return tuple(s.tool for s in cycle[start:] + cycle[:start])


# --- what the model and the user are told ----------------------------------------------------

def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _what(loop: Loop) -> str:
    if loop.cycle == 1:
        return f"this same {loop.tools[0]} call"
    return f"the same {loop.cycle} calls ({' → '.join(loop.tools)})"


def describe(loop: Loop) -> str:
    """One line for the user."""
    if loop.cycle == 1:
        return f"the agent made the same {loop.tools[0]} call {loop.count} times in a row " \
               "with the same result"
    return f"the agent repeated the same {loop.cycle} calls ({', '.join(loop.tools)}) " \
           f"{loop.count} times with the same results"


def warning(loop: Loop, limits: RepeatLimits) -> str:
    """Appended to the result of the call that completed `loop`."""
    then = (f" From the {_ordinal(limits.stop_at)} time it will not run."
            if limits.stop_at > loop.count else "")
    return (f"\n\n[Heddle] You have made {_what(loop)} {loop.count} times with the same "
            "result. Making it again will not give you anything new: change approach (a "
            "different tool, input or file), or stop and say what blocks you." + then)


def refusal(loop: Loop) -> str:
    """The result of the call the guard did not run."""
    return (f"This call did not run: it would have been the {_ordinal(loop.count)} time you "
            f"made {_what(loop)}, and every time gave the same result. Repeating it will not "
            "help. Work from the results you already have: try a different approach, or stop "
            "and tell the user what blocks you. The user has been told.")


GO_ON = ("[Heddle] The user saw that you were repeating yourself and let the turn go on. Do "
         "not make the same call again: change approach, or say what blocks you.")
