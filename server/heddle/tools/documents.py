"""The documents the editor holds open, as LSP document sync reports them.

A document has unsaved changes when the editor's text differs from the file on disk (or the
file is gone). Edit, MultiEdit and Write refuse such files instead of clobbering the user's
work; Read says it shows the saved version.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class _Document:
    text: str
    version: int


class EditorDocuments:
    def __init__(self) -> None:
        self._docs: dict[Path, _Document] = {}

    def open(self, path: Path, text: str, version: int) -> None:
        self._docs[path] = _Document(text, version)

    def change(self, path: Path, text: str, version: int) -> None:
        self._docs[path] = _Document(text, version)

    def close(self, path: Path) -> None:
        self._docs.pop(path, None)

    def text(self, path: Path) -> str | None:
        doc = self._docs.get(path)
        return None if doc is None else doc.text

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
