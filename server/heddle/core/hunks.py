"""The hunks of a proposed edit, and what the user decided about them: split a change into
`git add -p`-style hunks, write a subset of them, check an answer, and tell the model.

Pure functions over text. The hunks are difflib's grouped opcodes with 3 lines of context, the
same groups `difflib.unified_diff` prints, so a hunk's text is exactly a part of the diff.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Literal

import msgspec

CONTEXT = 3
MAX_REVIEW_CHARS = 1 << 20
"""Texts over this size (1 MiB) are previewed as a diff only: all or nothing."""


class Hunk(msgspec.Struct, frozen=True):
    index: int
    old_start: int
    """As in the `@@` line: 1-based, or for an empty range the line after which it is."""
    old_lines: int
    new_start: int
    new_lines: int
    diff: str


class HunkDecision(msgspec.Struct, frozen=True):
    index: int
    decision: Literal["accept", "reject"]
    message: str | None = None


@dataclass(frozen=True)
class Review:
    """An edit the user answered with less than the whole proposal, or with their own text."""

    before: str
    """The text the proposal was made from (the user saw it)."""
    after: str
    """The proposal."""
    written: str
    """What is to be written instead."""
    hunks: tuple[Hunk, ...]
    decisions: tuple[HunkDecision, ...]
    """Every hunk's outcome, in order; empty when `edited`."""
    edited: bool


def _groups(before: str, after: str) -> list[list[tuple[str, int, int, int, int]]]:
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    return list(difflib.SequenceMatcher(None, a, b).get_grouped_opcodes(CONTEXT))


def _start(i1: int, i2: int) -> int:
    return i1 + 1 if i2 > i1 else i1  # difflib's `@@` numbering of an empty range


def split(before: str, after: str) -> tuple[Hunk, ...]:
    """The hunks of the unified diff from `before` to `after`, in order."""
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    lines = list(difflib.unified_diff(a, b, n=CONTEXT))[2:]  # without the file header
    texts: list[list[str]] = []
    for line in lines:
        if line.startswith("@@ "):
            texts.append([])
        texts[-1].append(line)
    hunks = []
    for index, (group, text) in enumerate(zip(_groups(before, after), texts)):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        hunks.append(Hunk(index, _start(i1, i2), i2 - i1, _start(j1, j2), j2 - j1,
                          "".join(text)))
    return tuple(hunks)


def apply(before: str, after: str, accepted: set[int]) -> str:
    """`before` with the hunks whose index is in `accepted` applied, the others left out."""
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    out: list[str] = []
    at = 0  # next line of `a` not yet copied
    for index, group in enumerate(_groups(before, after)):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        out += a[at:i1]
        out += b[j1:j2] if index in accepted else a[i1:i2]
        at = i2
    return "".join(out + a[at:])


def check(hunks: tuple[Hunk, ...], decisions: list[HunkDecision]) -> str | None:
    """Why these decisions do not fit the hunks (unknown or repeated index); None if they do."""
    seen: set[int] = set()
    for d in decisions:
        if not 0 <= d.index < len(hunks):
            return (f"hunk index {d.index} is not one of the {len(hunks)} hunks offered"
                    if hunks else "the request offered no hunks")
        if d.index in seen:
            return f"hunk {d.index} is answered twice"
        seen.add(d.index)
    return None


def outcomes(hunks: tuple[Hunk, ...], decisions: list[HunkDecision]) -> tuple[HunkDecision, ...]:
    """Every hunk's decision in order (hunks not answered are accepted)."""
    given = {d.index: d for d in decisions}
    return tuple(given.get(h.index, HunkDecision(h.index, "accept")) for h in hunks)


def review(before: str, after: str, hunks: tuple[Hunk, ...], decisions: list[HunkDecision],
           final_text: str | None) -> Review | None:
    """What to write for this answer; None when it is the whole proposal as it stands."""
    if final_text is not None and final_text != after:
        return Review(before, after, final_text, hunks, (), True)
    if final_text is not None:
        return None
    every = outcomes(hunks, decisions)
    if all(d.decision == "accept" for d in every):
        return None
    accepted = {d.index for d in every if d.decision == "accept"}
    return Review(before, after, apply(before, after, accepted), hunks, every, False)


def _span(start: int, count: int) -> str:
    if count == 0:
        return f"after line {start}" if start else "at the start"
    return f"line {start}" if count == 1 else f"lines {start}-{start + count - 1}"


def _hunk(h: Hunk, total: int) -> str:
    return f"hunk {h.index + 1} of {total} ({_span(h.old_start, h.old_lines)})"


def describe(path: str, r: Review) -> str:
    """The tool result for a reviewed edit: what was applied, what rejected and why, and the
    diff from the proposal to what was written."""
    if r.edited:
        head = (f"Edited {path} with the user's own version of your change: the user edited "
                "the proposal before accepting it, so the file is not what you proposed.")
        body: list[str] = []
    else:
        applied = [h for h, d in zip(r.hunks, r.decisions) if d.decision == "accept"]
        rejected = [(h, d) for h, d in zip(r.hunks, r.decisions) if d.decision == "reject"]
        n = len(r.hunks)
        others = "the other" if len(rejected) == 1 else "the others"
        head = (f"Edited {path} with {len(applied)} of {n} hunks of your change; the user "
                f"rejected {others}, so the file is not what you proposed.")
        body = [f"Applied: {', '.join(_hunk(h, n) for h in applied)}."]
        for h, d in rejected:
            said = f', the user said: "{d.message}"' if d.message else " (no message)"
            body.append(f"Rejected: {_hunk(h, n)}{said}.")
        body.append("(Line ranges are of the file before the edit.)")
    diff = "".join(difflib.unified_diff(
        r.after.splitlines(keepends=True), r.written.splitlines(keepends=True),
        fromfile=f"{path} (proposed)", tofile=f"{path} (written)"))
    return "\n".join([head, *body, "The diff from your proposal to what was written:", diff])


def rejection_message(decisions: list[HunkDecision]) -> str | None:
    """The message of an answer that rejected every hunk: theirs, joined."""
    said = [d.message for d in decisions if d.message]
    return "; ".join(said) or None


def reviewable(before: str, after: str) -> bool:
    """Whether the texts are small enough to send whole and review hunk by hunk."""
    return all(len(t) <= MAX_REVIEW_CHARS // 4 or len(t.encode("utf-8", "surrogatepass"))
               <= MAX_REVIEW_CHARS for t in (before, after))
