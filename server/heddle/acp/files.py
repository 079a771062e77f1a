"""The client's files as the tools' editor buffers (ACP `fs/read_text_file`,
`fs/write_text_file`), for a client that advertised them.

Read shows the client's text of a file (an unsaved buffer in Zed, say), and Edit, MultiEdit
and Write start from it and land through the client, as document sync and
`workspace/applyEdit` do on the LSP door (`heddle.tools.landing`). Only what the client
advertised is ever called: without `readTextFile` the text comes from the disk, without
`writeTextFile` the edit is written to disk (and refused when the client's text differs,
as for an LSP buffer with unsaved changes).

The tools ask from worker threads (`buffer`, `unsaved`); the request goes out on the event
loop and the thread waits for it, at most `timeout` seconds.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Awaitable, Callable
from urllib.parse import unquote, urlparse

import anyio
import anyio.from_thread

from heddle.core.tools import Buffer
from heddle.tools.landing import read_text

log = logging.getLogger(__name__)

Request = Callable[[str, dict[str, Any]], Awaitable[Any]]
"""Sends a request to the client and returns its result (raises on an error answer)."""


class ClientFiles:
    def __init__(self, session_id: str, request: Request, read: bool, write: bool,
                 timeout: float):
        self.session_id = session_id
        self._request = request
        self.read = read
        self.write = write
        self.timeout = timeout
        self._fetched: dict[Path, str] = {}
        """What `buffer` just fetched, for the `unsaved` that follows it in the same call."""

    # -- EditorBuffers (worker threads) ------------------------------------------------------
    def buffer(self, path: Path) -> Buffer | None:
        if self.read:
            text = self._fetch(path)
            if text is not None:
                self._fetched[path] = text
                return Buffer(path.as_uri(), text, 0)
        if self.write:
            # edits of a file on disk land through the client, starting from the disk: when
            # the client cannot read at all, or could not read this file. A file that is on
            # neither is no buffer: Read says it does not exist, and a new file is created on
            # disk (the client sees it appear).
            text = read_text(path)
            return None if text is None else Buffer(path.as_uri(), text, 0)
        return None

    def unsaved(self, path: Path) -> bool:
        if not self.read:
            return False
        text = self._fetched.pop(path, None)
        if text is None:
            text = self._fetch(path)
        try:
            on_disk = path.read_bytes().decode("utf-8", errors="replace")
        except FileNotFoundError:
            return bool(text)
        except OSError:
            return False
        return text is not None and text != on_disk

    @property
    def editor(self) -> ClientFiles | None:
        return self if self.write else None

    diagnostics = None
    """ACP has no request for a document's diagnostics: edits report none."""

    # -- Editor (the event loop) -------------------------------------------------------------
    async def apply(self, buffer: Buffer, new_text: str, label: str) -> str | None:
        path = unquote(urlparse(buffer.uri).path)
        try:
            with anyio.fail_after(self.timeout):
                await self._request("fs/write_text_file", {
                    "sessionId": self.session_id, "path": path, "content": new_text})
        except TimeoutError:
            return f"no answer to fs/write_text_file within {self.timeout:g} s"
        except Exception as exc:  # an error answer, or the client went away
            return f"fs/write_text_file failed: {exc}"
        return None

    def _fetch(self, path: Path) -> str | None:
        async def ask() -> str | None:
            with anyio.fail_after(self.timeout):
                result = await self._request("fs/read_text_file", {
                    "sessionId": self.session_id, "path": str(path)})
            content = result.get("content") if isinstance(result, dict) else None
            return content if isinstance(content, str) else None
        try:
            return anyio.from_thread.run(ask)
        except TimeoutError:
            log.warning("no answer to fs/read_text_file for %s within %g s; using the disk",
                        path, self.timeout)
        except Exception as exc:
            log.info("fs/read_text_file %s: %s", path, exc)
        return None
