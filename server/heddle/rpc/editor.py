"""The editor as the tools' `Editor`: changes to open documents become `workspace/applyEdit`.

Only for a client that declared `workspace.applyEdit` and `workspace.workspaceEdit.
documentChanges`. The edit carries the buffer's version as the client last reported it, and
is line-granular (one TextEdit per changed region, ranges in the document before the edit), so
the editor keeps cursors, marks and undo sensible and refuses an edit of text it no longer has.
"""

from __future__ import annotations

import difflib
import logging
import re

import anyio
import msgspec
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException

import heddle_protocol as wire
from heddle.core.tools import Buffer
from heddle.rpc.daemon import Daemon

log = logging.getLogger(__name__)


def _width(text: str, encoding: str) -> int:
    """`text`'s length in the position encoding's code units."""
    if encoding == "utf-8":
        return len(text.encode("utf-8", "surrogatepass"))
    if encoding == "utf-32":
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _position(lines: list[str], index: int, encoding: str) -> wire.Position:
    """The start of line `index`, or the end of a last line without a newline."""
    if index == len(lines) and lines and not lines[-1].endswith(("\n", "\r")):
        return wire.Position(line=index - 1, character=_width(lines[-1], encoding))
    return wire.Position(line=index, character=0)


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def lsp_lines(text: str) -> list[str]:
    """`text`'s lines as LSP counts them (ended by \\n, \\r\\n or \\r only), ends kept."""
    return _LINE.findall(text)


def line_edits(before: str, after: str, encoding: str = "utf-16") -> list[wire.TextEdit]:
    """The TextEdits that turn `before` into `after`, one per changed run of lines."""
    a, b = lsp_lines(before), lsp_lines(after)
    edits = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op != "equal":
            edits.append(wire.TextEdit(
                range=wire.TextRange(start=_position(a, i1, encoding),
                                     end=_position(a, i2, encoding)),
                new_text="".join(b[j1:j2])))
    return edits


def can_apply(caps: lsp.ClientCapabilities | None) -> bool:
    ws = caps.workspace if caps is not None else None
    return bool(ws and ws.apply_edit and ws.workspace_edit and ws.workspace_edit.document_changes)


class LspEditor:
    def __init__(self, server: Daemon, timeout: float):
        self._server = server
        self._timeout = timeout

    def _encoding(self) -> str:
        encoding = self._server.workspace.position_encoding  # negotiated at initialize
        return str(getattr(encoding, "value", encoding) or "utf-16")

    async def apply(self, buffer: Buffer, new_text: str, label: str) -> str | None:
        encoding = self._encoding()
        edits = await anyio.to_thread.run_sync(line_edits, buffer.text, new_text, encoding)
        params = wire.ApplyWorkspaceEditParams(label=label, edit=wire.WorkspaceEdit(
            document_changes=[wire.TextDocumentEdit(
                text_document=wire.VersionedDocument(uri=buffer.uri, version=buffer.version),
                edits=edits)]))
        try:
            raw = await self._server.protocol.request("workspace/applyEdit", params,
                                                      self._timeout)
        except TimeoutError:
            return f"no answer within {self._timeout:g} s (HEDDLE_APPLY_EDIT_TIMEOUT)"
        except JsonRpcException as exc:
            return f"it answered with an error: {exc}"
        try:
            result = msgspec.convert(raw, wire.ApplyWorkspaceEditResult)
        except msgspec.ValidationError as exc:
            return f"its answer was invalid: {exc}"
        if not result.applied:
            log.info("the editor did not apply an edit to %s: %s", buffer.uri,
                     result.failure_reason)
            return result.failure_reason or "it gave no reason"
        return None
