"""LSP document sync (`textDocument/didOpen`, `didChange`, `didClose`) into the core's view of
what the editor holds. pygls applies incremental changes to its own copy first; the full text
is handed on, so Read shows the editor's text and Edit and Write start from it. For a client
that can apply edits, the tools change open documents through `workspace/applyEdit`."""

from __future__ import annotations

import os
from pathlib import Path

from lsprotocol import types as lsp
from pygls.uris import to_fs_path

from heddle.rpc.daemon import Daemon
from heddle.rpc.editor import LspEditor, can_apply


def _path(uri: str) -> Path | None:
    """The resolved path of a `file:` URI; None for other schemes (untitled buffers, ...)."""
    if not uri.startswith("file:"):
        return None
    fs = to_fs_path(uri)
    return Path(os.path.realpath(fs)) if fs else None


def register(server: Daemon) -> None:
    documents = server.sessions.documents
    editor = LspEditor(server, server.apply_edit_timeout)
    documents.editor_source = lambda: (
        editor if can_apply(getattr(server.protocol, "client_capabilities", None)) else None)

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(params: lsp.DidOpenTextDocumentParams) -> None:
        doc = params.text_document
        if (path := _path(doc.uri)) is not None:
            documents.open(path, doc.text, doc.version, doc.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(params: lsp.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        if (path := _path(uri)) is not None:
            text = server.workspace.get_text_document(uri).source
            documents.change(path, text, params.text_document.version)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(params: lsp.DidCloseTextDocumentParams) -> None:
        if (path := _path(params.text_document.uri)) is not None:
            documents.close(path)
