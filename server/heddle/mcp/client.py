"""One connection to one MCP server, on the `mcp` SDK: start it, list its tools, call them,
notice when it dies. Imported only when a session has servers (the SDK costs start-up time).

A stdio server runs the way Heddle runs every command (`heddle.processes.groups`): the leader
of a process group of its own, registered with the reaper, in the tool environment (no secrets
of Heddle's unless `pass_env` names them) with the server's own `env` over it, and stopped by
killing its whole group. Its stdout is read here, a line per message (a line is bounded); its
stderr goes to the daemon's log, a line at a time, at debug level, its last lines kept for the
error a dying server leaves and for the report the session's client gets — with the values of its `env` and of secret-looking variables masked,
since a server may well print its own token.
"""

from __future__ import annotations

import base64
import logging
import subprocess
from collections import deque
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator

import anyio
import anyio.abc
import httpx2
import mcp_types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

import heddle
from heddle.core.tools import ToolError
from heddle.mcp.config import McpServerConfig
from heddle.mcp.values import CONNECT_TIMEOUT, CallResult, Ending, RemoteTool
from heddle.processes.environment import tool_env
from heddle.processes.groups import open_group, reap
from heddle.secret_env import is_secret

log = logging.getLogger(__name__)
logging.getLogger("mcp").setLevel(logging.INFO)  # its debug lines are every message in full

MAX_LINE = 64 << 20
"""Bytes one message from a stdio server may take (an image result is a few MB at most)."""
MAX_PAGES = 20
"""`tools/list` pages read (a server that keeps paging is cut off there)."""
MAX_TOOLS = 500
STDERR_TAIL = 10
"""Lines of a server's stderr kept for the error it leaves when it dies (and for its report)."""
STDERR_LINE = 500
"""Characters of one stderr line kept."""
STDERR_WAIT = 0.5
"""Seconds to wait, once a server has exited, for the rest of its stderr (a child of its may
hold the pipe open)."""
MAX_IMAGE_BYTES = 5 << 20
"""Base64 characters of one image passed on (the Messages API's own limit)."""


@dataclass
class Connection:
    """A started, initialised server and the tools it listed."""

    name: str
    session: ClientSession
    tools: tuple[RemoteTool, ...]
    died: anyio.Event = field(default_factory=anyio.Event)
    ending: Ending | None = None
    calls: set[anyio.CancelScope] = field(default_factory=set)

    def lose(self, ending: Ending) -> None:
        """The server is gone: end the calls waiting for it."""
        if not self.died.is_set():
            self.ending = ending
            self.died.set()
            for scope in self.calls:
                scope.cancel()

    async def lost(self) -> Ending:
        """Wait until the server dies; how it did."""
        await self.died.wait()
        assert self.ending is not None
        return self.ending

    async def call(self, tool: str, arguments: dict[str, Any], timeout: float) -> CallResult:
        scope = anyio.CancelScope()
        self.calls.add(scope)
        try:
            with scope, anyio.fail_after(timeout):
                result = await self.session.call_tool(tool, arguments)
        except TimeoutError:
            raise ToolError(f"The MCP server {self.name} did not answer {tool} within "
                            f"{timeout:g} s (its `timeout` setting), so the call was abandoned."
                            ) from None
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED:
                with anyio.move_on_after(1):  # why it closed: the exit status, once seen
                    await self.died.wait()
                raise self._died(tool) from None
            raise ToolError(f"The MCP server {self.name} failed {tool}: {exc.message}") from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            raise self._died(tool) from None
        except httpx2.TransportError as exc:  # an HTTP server gone: connect again (bounded)
            self.lose(Ending(describe(exc)))
            raise self._died(tool) from None
        except Exception as exc:  # whatever else a server makes the SDK raise (a bad result)
            raise ToolError(f"The MCP server {self.name} failed {tool}: {describe(exc)}") from None
        finally:
            self.calls.discard(scope)
        if scope.cancel_called:
            raise self._died(tool)
        return convert(result)

    def _died(self, tool: str) -> ToolError:
        why = self.ending.line() if self.ending else "connection closed"
        return ToolError(f"The MCP server {self.name} stopped while running {tool} "
                         f"({why}); Heddle restarts it, so a later call may work.")


class Gone(Exception):
    """The server exited before it was ready; `ending` says how."""

    def __init__(self, ending: Ending) -> None:
        super().__init__(ending.line())
        self.ending = ending


def ending(exc: BaseException) -> Ending:
    """How a connection that failed ended: with its stderr when its process exited."""
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return ending(exc.exceptions[0])
    return exc.ending if isinstance(exc, Gone) else Ending(describe(exc))


def describe(exc: BaseException) -> str:
    """A server's failure in one line (no traceback, no configuration values)."""
    if isinstance(exc, Gone):
        return str(exc)
    if isinstance(exc, FileNotFoundError):
        return f"cannot start it: {exc.strerror}: {exc.filename}"
    if isinstance(exc, TimeoutError):
        return f"it did not start and list its tools within {CONNECT_TIMEOUT:g} s"
    if isinstance(exc, MCPError):
        return f"it answered with an error: {exc.message}"
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return describe(exc.exceptions[0])
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


@asynccontextmanager
async def connect(config: McpServerConfig, workspace: Path) -> AsyncIterator[Connection]:
    """Start `config`'s server (stdio) or reach it (HTTP), initialise, list its tools."""
    transport = _stdio(config, workspace) if config.command else _http(config)
    async with transport as (read, write, lost):
        async with ClientSession(read, write, client_info=types.Implementation(
                name="heddle", version=heddle.__version__)) as session:
            try:
                with anyio.fail_after(CONNECT_TIMEOUT):
                    await session.initialize()
                    tools = await _list_tools(session)
            except MCPError as exc:
                if exc.code != types.CONNECTION_CLOSED:
                    raise
                with anyio.move_on_after(1):  # say how it ended: its exit status, its stderr
                    raise Gone(await lost()) from None
                raise
            connection = Connection(config.name, session, tools)
            async with anyio.create_task_group() as tg:
                async def watch() -> None:
                    connection.lose(await lost())
                tg.start_soon(watch)
                try:
                    yield connection
                finally:
                    tg.cancel_scope.cancel()


async def _list_tools(session: ClientSession) -> tuple[RemoteTool, ...]:
    found: list[RemoteTool] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await session.list_tools(
            params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        for tool in page.tools:
            hints = tool.annotations
            schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
            if not tool.name or schema.get("type") != "object":
                # the Messages API refuses a whole request over one such tool
                log.warning("MCP server tool %r has no name or no object input schema; "
                            "not offered", tool.name)
                continue
            found.append(RemoteTool(tool.name, tool.description or "", dict(schema),
                                    bool(hints and hints.read_only_hint),
                                    (hints.title if hints else None) or tool.title))
        cursor = page.next_cursor
        if not cursor or len(found) >= MAX_TOOLS:
            break
    return tuple(found[:MAX_TOOLS])


def convert(result: types.CallToolResult) -> CallResult:
    """Text as text, images as images, resources as their text (a binary one by its name),
    audio and links by what they are; `isError` as it is."""
    texts: list[str] = []
    images: list[tuple[str, str]] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            texts.append(block.text)
        elif isinstance(block, types.ImageContent):
            if len(block.data) > MAX_IMAGE_BYTES:
                texts.append(f"[an image ({block.mime_type}, {len(block.data)} base64 "
                             "characters) too large to show]")
            elif not _base64(block.data):
                texts.append(f"[an image ({block.mime_type}) that is not valid base64]")
            else:
                images.append((block.mime_type, block.data))
        elif isinstance(block, types.EmbeddedResource):
            res = block.resource
            if isinstance(res, types.TextResourceContents):
                texts.append(f"[resource {res.uri}]\n{res.text}")
            else:
                texts.append(f"[resource {res.uri}: {res.mime_type or 'binary'}, "
                             f"{len(res.blob)} base64 characters, not shown]")
        elif isinstance(block, types.ResourceLink):
            texts.append(f"[resource link {block.uri}"
                         + (f": {block.description}]" if block.description else "]"))
        elif isinstance(block, types.AudioContent):
            texts.append(f"[audio ({block.mime_type}), not shown]")
    if not texts and result.structured_content is not None:
        import json
        texts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return CallResult("\n".join(texts), tuple(images), bool(result.is_error))


def _base64(data: str) -> bool:
    try:
        base64.b64decode(data, validate=True)
        return True
    except ValueError:
        return False


MASKED = "[secret]"
MASK_MIN = 4
"""Shorter values are not masked: `1` or `on` would blank out every digit and word."""


def _masker(config: McpServerConfig, env: dict[str, str]):
    """A function that hides the secrets a stdio server holds in a line it wrote."""
    values = set(config.env.values())  # (the variables `pass_env` lets through look secret)
    values |= {value for name, value in env.items() if is_secret(name)}
    secrets = sorted((v for v in values if len(v) >= MASK_MIN), key=len, reverse=True)

    def mask(text: str) -> str:
        for secret in secrets:
            text = text.replace(secret, MASKED)
        return text
    return mask


# --- transports: (read stream, write stream, `lost()` → why the server is gone) -------------

@asynccontextmanager
async def _stdio(config: McpServerConfig, workspace: Path):
    assert config.command is not None
    env = {**tool_env(pass_env=config.pass_env), **config.env}
    mask = _masker(config, env)
    cwd = workspace / config.cwd if config.cwd else workspace
    process = await open_group([config.command, *config.args], env, cwd=cwd,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    tail: deque[str] = deque(maxlen=STDERR_TAIL)
    stderr_done = anyio.Event()
    to_session, read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    exited = anyio.Event()

    async def reader() -> None:
        assert process.stdout is not None
        async with to_session:
            async for line in _lines(process.stdout):
                try:
                    message = SessionMessage(types.jsonrpc_message_adapter.validate_json(line))
                except ValueError:
                    log.info("MCP server %s wrote a line that is not a JSON-RPC message "
                             "(%d bytes); ignored", config.name, len(line))
                    continue
                await to_session.send(message)

    async def writer() -> None:
        assert process.stdin is not None
        async with from_session:
            async for message in from_session:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                try:
                    await process.stdin.send(data.encode() + b"\n")
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                    return

    async def errors() -> None:
        assert process.stderr is not None
        try:
            async for line in _lines(process.stderr):
                text = mask(line.decode(errors="replace").rstrip())[:STDERR_LINE]
                tail.append(text)
                log.debug("MCP server %s: %s", config.name, text)
        finally:
            stderr_done.set()

    async def waiter() -> None:
        await process.wait()
        exited.set()

    async def lost() -> Ending:
        await exited.wait()
        with anyio.move_on_after(STDERR_WAIT):  # its last stderr lines
            await stderr_done.wait()
        code = process.returncode
        how = f"exited with code {code}" if code is not None and code >= 0 else \
            f"killed by signal {-code}" if code is not None else "exited"
        return Ending(how, tuple(tail))

    try:
        async with anyio.create_task_group() as tg:
            for task in (reader, writer, errors, waiter):
                tg.start_soon(task)
            try:
                yield read, write, lost
            finally:
                tg.cancel_scope.cancel()
    finally:
        await reap(process)  # its whole group, shielded and bounded


async def _lines(stream: anyio.abc.ByteReceiveStream) -> AsyncIterator[bytes]:
    """Lines of `stream` until its end (the last one also without its newline); a line over
    MAX_LINE is dropped."""
    buffer = bytearray()
    skipping = False
    while True:
        try:
            chunk = await stream.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            if buffer and not skipping:  # a last line without its newline
                yield bytes(buffer)
            return
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if not skipping:
                buffer += chunk[start:end]
                yield bytes(buffer)
            buffer.clear()
            skipping = False
            start = end + 1
        if not skipping:
            buffer += chunk[start:]
            if len(buffer) > MAX_LINE:
                log.warning("an MCP server wrote a line over %d bytes; dropped", MAX_LINE)
                buffer.clear()
                skipping = True


@asynccontextmanager
async def _http(config: McpServerConfig):
    assert config.url is not None
    client = httpx2.AsyncClient(headers=dict(config.headers),
                                timeout=httpx2.Timeout(30, read=300))
    never = anyio.Event()

    async def lost() -> Ending:  # a call that fails says so; there is no process to watch
        await never.wait()
        return Ending("connection closed")

    async with client, streamable_http_client(config.url, http_client=client) as (read, write):
        yield read, write, lost
