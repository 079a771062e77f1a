"""The documents the editor holds open, as LSP document sync reports them, and the editor that
can change them.

A document has unsaved changes when the editor's text differs from the file on disk (or the
file is gone). Read shows an open document's text. Edit, MultiEdit and Write change an open
document through the editor when the client can apply edits (`editor`); otherwise they refuse
a document with unsaved changes instead of clobbering the user's work.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from heddle.core.diagnostics import Diagnostics
from heddle.core.tools import Buffer, Editor


class EditorDocuments:
    def __init__(self) -> None:
        self._docs: dict[Path, Buffer] = {}
        self.editor_source: Callable[[], Editor | None] = lambda: None
        """Set by the front door: the editor, while the client can apply edits."""
        self.diagnostics_source: Callable[[], Diagnostics | None] = lambda: None
        """Set by the front door: how to ask the client for diagnostics, if it can answer."""

    @property
    def editor(self) -> Editor | None:
        return self.editor_source()

    @property
    def diagnostics(self) -> Diagnostics | None:
        return self.diagnostics_source()

    def open(self, path: Path, text: str, version: int, uri: str | None = None) -> None:
        self._docs[path] = Buffer(uri or path.as_uri(), text, version)

    def change(self, path: Path, text: str, version: int) -> None:
        old = self._docs.get(path)
        self._docs[path] = Buffer(old.uri if old else path.as_uri(), text, version)

    def close(self, path: Path) -> None:
        self._docs.pop(path, None)

    def text(self, path: Path) -> str | None:
        doc = self._docs.get(path)
        return None if doc is None else doc.text

    def buffer(self, path: Path) -> Buffer | None:
        return self._docs.get(path)

    def unsaved(self, path: Path) -> bool:
        doc = self._docs.get(path)
        if doc is None:
            return False
        try:
            on_disk = path.read_bytes().decode("utf-8", errors="replace")
        except FileNotFoundError:
            return doc.text != ""
        except OSError:
            return False
        return on_disk != doc.text

    def __len__(self) -> int:
        return len(self._docs)
