"""The editor's new errors and warnings after an edit of an open document.

Around an edit that goes through the editor, the daemon asks the client for the document's
diagnostics (`diagnostics/list`) twice over: once just before the edit (the baseline), and
then, since language servers take a moment to check the new text, every `POLL` seconds after
the edit has landed until they are fresh and settled or `ToolContext.diagnostics_wait` has
passed. They are fresh once the editor has had them reported again since the baseline (its
`generation` grew, or they differ), and settled when two answers in a row agree. What the model
is told is the errors and warnings of the last answer that the baseline does not account for
(same severity and message, at the line the edit moved it to or, failing that, anywhere),
at most `LISTED` of them.

A client that does not answer in time, answers with an error or answers something else costs
the edit nothing: the result is as it would be without diagnostics, and the log says why.
"""

from __future__ import annotations

import difflib
import logging
import re
from collections import defaultdict
from dataclasses import dataclass

import anyio

from heddle.core.diagnostics import (ERROR, WARNING, Diagnostic, Diagnostics, DiagnosticsReport,
                                     DiagnosticsUnavailable)
from heddle.core.tools import Buffer, ToolContext
from heddle.words import plural

log = logging.getLogger(__name__)

DEFAULT_WAIT = 2.0
"""Seconds an edit waits at most for fresh diagnostics, unless the settings say otherwise."""
POLL = 0.3
"""Seconds between the edit landing and the first question, and between questions."""
ASK_TIMEOUT = 1.0
"""Seconds one answer may take (the editor answers from what it holds: milliseconds)."""
LISTED = 10
"""New problems listed in a result; the rest are counted."""
MESSAGE_CHARS = 300


@dataclass(frozen=True)
class Baseline:
    """The diagnostics of an open document just before an edit, and where to ask again."""

    source: Diagnostics
    buffer: Buffer
    report: DiagnosticsReport


async def before_edit(ctx: ToolContext, buffer: Buffer) -> Baseline | None:
    """The document's diagnostics before the edit; None when they will not be reported (the
    client cannot answer, the setting is 0, or it did not answer now)."""
    source = ctx.documents.diagnostics if ctx.documents is not None else None
    if source is None or ctx.diagnostics_wait <= 0:
        return None
    try:
        report = await source.report(buffer.uri, min(ASK_TIMEOUT, ctx.diagnostics_wait))
    except DiagnosticsUnavailable as exc:
        log.warning("no diagnostics of %s before the edit: %s", buffer.uri, exc)
        return None
    return Baseline(source, buffer, report)


async def after_edit(ctx: ToolContext, baseline: Baseline | None, new_text: str,
                     rel: str) -> str:
    """What to add to the edit's result: the editor's new errors and warnings once they have
    settled (or the wait is over), as a paragraph; "" when there are none or no answer."""
    if baseline is None:
        return ""
    uri, started = baseline.buffer.uri, anyio.current_time()
    deadline = started + ctx.diagnostics_wait
    previous = baseline.report
    while True:
        await anyio.sleep(max(0.0, min(POLL, deadline - anyio.current_time())))
        try:
            report = await baseline.source.report(uri, ASK_TIMEOUT)
        except DiagnosticsUnavailable as exc:
            log.warning("no diagnostics of %s after the edit: %s", uri, exc)
            return ""
        if fresh(baseline.report, report) and report == previous \
                or anyio.current_time() >= deadline:
            break
        previous = report
    log.debug("diagnostics of %s %.2f s after the edit (%s): %d", uri,
              anyio.current_time() - started, "settled" if report == previous else "timed out",
              len(report.diagnostics))
    # (diffing a large file takes a while: not on the event loop)
    found = await anyio.to_thread.run_sync(new_problems, baseline.report.diagnostics,
                                           report.diagnostics, baseline.buffer.text, new_text)
    return describe(found, rel)


def fresh(before: DiagnosticsReport, now: DiagnosticsReport) -> bool:
    """Whether the editor has had the document's diagnostics reported since `before`."""
    if before.generation is not None and now.generation is not None \
            and now.generation != before.generation:
        return True
    return now.diagnostics != before.diagnostics


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def _lines(text: str) -> list[str]:
    """Lines as LSP counts them (ended by \\n, \\r\\n or \\r only), as the editor numbers them."""
    return _LINE.findall(text)


def moved_lines(before: str, after: str) -> dict[int, int]:
    """Where the lines the edit left alone went: 0-based line in `before` → line in `after`."""
    moved: dict[int, int] = {}
    matcher = difflib.SequenceMatcher(None, _lines(before), _lines(after), autojunk=False)
    for i, j, n in matcher.get_matching_blocks():
        moved.update((i + k, j + k) for k in range(n))
    return moved


def new_problems(before: tuple[Diagnostic, ...], after: tuple[Diagnostic, ...],
                 before_text: str, after_text: str) -> list[Diagnostic]:
    """The errors and warnings of `after` that `before` does not account for, by line.

    A diagnostic of `before` accounts for one of `after` with the same severity and message:
    first one at the line the edit moved it to, then any other."""
    problems = [d for d in after if d.severity in (ERROR, WARNING)]
    if not problems:
        return []
    moved = moved_lines(before_text, after_text)
    left: dict[tuple[int, str], list[int | None]] = defaultdict(list)
    for d in before:
        left[d.severity, d.message].append(moved.get(d.line))
    unmatched = []
    for d in problems:  # the same problem where it was
        lines = left.get((d.severity, d.message))
        if lines and d.line in lines:
            lines.remove(d.line)
        else:
            unmatched.append(d)
    new = []
    for d in unmatched:  # the same problem, moved by more than the edit explains
        lines = left.get((d.severity, d.message))
        if lines:
            lines.pop()
        else:
            new.append(d)
    return sorted(new, key=lambda d: (d.line, d.severity))


def _one_line(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def describe(problems: list[Diagnostic], rel: str) -> str:
    """The paragraph the model reads after the edit's result; "" for no problems."""
    if not problems:
        return ""
    errors = sum(d.severity == ERROR for d in problems)
    counts = " and ".join(plural(n, f"new {kind}") for n, kind in
                          ((errors, "error"), (len(problems) - errors, "warning")) if n)
    lines = [f"The editor now reports {counts} in {rel}:"]
    for d in problems[:LISTED]:
        origin = ", ".join(_one_line(part, 80) for part in (d.source, d.code) if part)
        lines.append(f"  line {d.line + 1}: {'error' if d.severity == ERROR else 'warning'}: "
                     f"{_one_line(d.message, MESSAGE_CHARS)}" + (f" ({origin})" if origin else ""))
    if len(problems) > LISTED:
        lines.append(f"  … and {len(problems) - LISTED} more")
    lines.append("They were not there before this edit. Fix the ones your change caused, "
                 "unless your next edits resolve them.")
    return "\n\n" + "\n".join(lines)
