"""What the method handlers may use of the daemon's server: its state and two of its services.

`heddle.rpc.server.HeddleServer` is the one implementation; it registers every area's handlers
(`register(daemon)`), so the areas name this protocol rather than import the server.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Protocol

from pygls.workspace import Workspace

from heddle.rpc.protocol import HeddleProtocol
from heddle.sessions.session import SessionOptions, SessionRegistry
from heddle.settings import LoadedSettings
from heddle.sessions.turns import TurnDeps


class Daemon(Protocol):
    protocol: HeddleProtocol
    sessions: SessionRegistry
    turn_deps: TurnDeps
    default_model: str
    permission_timeout: float
    apply_edit_timeout: float
    requests_running: set[asyncio.Task]
    """Handlers of requests not yet answered (a stopping daemon lets them answer)."""

    @property
    def workspace(self) -> Workspace: ...

    @property
    def client_answers_permissions(self) -> bool: ...

    def feature(self, name: str, options: Any = None) -> Callable: ...

    def session_options(self) -> SessionOptions: ...

    def defaults_for(self, settings: LoadedSettings) -> SessionOptions:
        """A session's defaults in a workspace with `settings` (the ACP door's too)."""

    async def cancel_all_turns(self) -> None: ...
