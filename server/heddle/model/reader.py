"""Reading a streamed response body in reads, not in HTTP chunks.

The HTTP client hands the body over one chunk at a time, and a streaming server sends one chunk
per event, so a consumer that handles each chunk as it comes handles each event on its own
(decoding, and every async generator between the model and the editor). `BodyReader` reads the
chunks in a task of its own and lets the consumer take everything that has arrived since it last
looked: what one network read produced when the consumer keeps up, more when it is behind.
Nothing waits for more data: `take` returns as soon as there is anything.

The reader is an asyncio task owned by the `async with` block (an anyio task group cannot be held
across the yields of the async generator that reads the model); it stops reading while `limit`
bytes wait to be taken, and it is cancelled and awaited when the block exits.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import AsyncIterator

import anyio


class BodyReader:
    def __init__(self, chunks: AsyncIterator[bytes], limit: int = 256 * 1024) -> None:
        self._chunks = chunks
        self._limit = limit
        self._parts: list[bytes] = []
        self._size = 0
        self._arrived = asyncio.Event()
        self._room = asyncio.Event()
        self._finished = False
        self._error: BaseException | None = None
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> BodyReader:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                await asyncio.wait({task})

    async def _run(self) -> None:
        try:
            async for chunk in self._chunks:
                self._parts.append(chunk)
                self._size += len(chunk)
                self._arrived.set()
                if self._size >= self._limit:
                    self._room.clear()
                    await self._room.wait()
        except Exception as exc:  # handed to the consumer, which raises it in its own task
            self._error = exc
        finally:
            self._finished = True
            self._arrived.set()

    async def take(self) -> bytes | None:
        """All the bytes that arrived since the last call (waiting for some); None at the end.

        Raises what reading the body raised, once the bytes before the failure are taken.
        """
        if not self._parts and not self._finished:
            await self._arrived.wait()
        self._arrived.clear()
        if self._parts:
            parts, self._parts, self._size = self._parts, [], 0
            self._room.set()
            return parts[0] if len(parts) == 1 else b"".join(parts)
        if self._error is not None:
            raise self._error
        return None
