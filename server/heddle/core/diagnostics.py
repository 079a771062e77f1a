"""What the editor reports about an open document: its language servers' diagnostics.

The tools ask for them around an edit of an open document (`heddle.tools.diagnostics`); a front
door whose client can answer implements `Diagnostics`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

ERROR, WARNING, INFORMATION, HINT = 1, 2, 3, 4
"""Severities, as LSP numbers them."""


@dataclass(frozen=True)
class Diagnostic:
    line: int
    """0-based, in the document as the editor held it when it answered."""
    severity: int
    message: str
    source: str | None = None
    code: str | None = None


@dataclass(frozen=True)
class DiagnosticsReport:
    diagnostics: tuple[Diagnostic, ...]
    generation: int | None = None
    """Raised by the editor each time the document's diagnostics are reported again, even
    unchanged; None: the editor does not count."""


class DiagnosticsUnavailable(Exception):
    """The editor gave no diagnostics: no answer in time, an error, an answer that is not one."""


class Diagnostics(Protocol):
    """Asks the editor for an open document's diagnostics."""

    async def report(self, uri: str, timeout: float) -> DiagnosticsReport:
        """The diagnostics the editor holds for document `uri` now; DiagnosticsUnavailable if
        it does not answer within `timeout` seconds, or answers something else."""
        ...
