"""The method table: the single list that drives registration, schema and client constants."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from heddle_protocol import types as t
from heddle_protocol.events import TurnEventParams


class Direction(enum.Enum):
    CLIENT_TO_SERVER = "clientToServer"
    SERVER_TO_CLIENT = "serverToClient"


class Kind(enum.Enum):
    REQUEST = "request"
    NOTIFICATION = "notification"


@dataclass(frozen=True)
class Method:
    name: str
    direction: Direction
    kind: Kind
    params: type
    result: type | None
    doc: str


METHODS: tuple[Method, ...] = (
    Method("session/new", Direction.CLIENT_TO_SERVER, Kind.REQUEST,
           t.SessionNewParams, t.SessionNewResult,
           "Open a session on a workspace folder."),
    Method("session/list", Direction.CLIENT_TO_SERVER, Kind.REQUEST,
           t.SessionListParams, t.SessionListResult,
           "List the sessions kept on disk, newest first."),
    Method("session/load", Direction.CLIENT_TO_SERVER, Kind.REQUEST,
           t.SessionLoadParams, t.SessionLoadResult,
           "Bring a session back: its history is replayed as turn/event, then it is live."),
    Method("session/configure", Direction.CLIENT_TO_SERVER, Kind.REQUEST,
           t.SessionConfigureParams, t.SessionConfigureResult,
           "Change an idle session's permission mode and/or model for its next turns."),
    Method("session/compact", Direction.CLIENT_TO_SERVER, Kind.REQUEST,
           t.SessionCompactParams, t.SessionCompactResult,
           "Summarise an idle session's history now, keeping the last rounds verbatim."),
    Method("session/close", Direction.CLIENT_TO_SERVER, Kind.REQUEST,
           t.SessionCloseParams, t.SessionCloseResult,
           "End a live session: its running turn is cancelled and its MCP servers are "
           "stopped; its transcript stays (session/load brings it back)."),
    Method("turn/start", Direction.CLIENT_TO_SERVER, Kind.REQUEST,
           t.TurnStartParams, t.TurnStartResult,
           "Run one user prompt to its end; stays open while the turn runs."),
    Method("turn/cancel", Direction.CLIENT_TO_SERVER, Kind.NOTIFICATION,
           t.TurnCancelParams, None,
           "Cancel the running turn of a session. Idempotent."),
    Method("turn/event", Direction.SERVER_TO_CLIENT, Kind.NOTIFICATION,
           TurnEventParams, None,
           "Progress of a running turn."),
    Method("mcpServer/changed", Direction.SERVER_TO_CLIENT, Kind.NOTIFICATION,
           t.McpServerChangedParams, None,
           "An MCP server of a live session stopped and is restarted, runs again, became "
           "ready late, or failed for good; with the last lines of its stderr."),
    Method("permission/request", Direction.SERVER_TO_CLIENT, Kind.REQUEST,
           t.PermissionRequestParams, t.PermissionRequestResult,
           "Ask the user whether a tool call may run."),
    Method("workspace/applyEdit", Direction.SERVER_TO_CLIENT, Kind.REQUEST,
           t.ApplyWorkspaceEditParams, t.ApplyWorkspaceEditResult,
           "Standard LSP: change an open document's buffer at the version the client reported; "
           "sent only to clients that declare workspace.applyEdit and documentChanges."),
    Method("diagnostics/list", Direction.SERVER_TO_CLIENT, Kind.REQUEST,
           t.DiagnosticsListParams, t.DiagnosticsListResult,
           "The diagnostics the client holds for an open document; sent only to clients that "
           "declare diagnosticRequests, around an edit of that document."),
    Method("rules/list", Direction.CLIENT_TO_SERVER, Kind.REQUEST,
           t.RulesListParams, t.RulesListResult,
           "The permission rules a session applies, with their scopes."),
    Method("rules/add", Direction.CLIENT_TO_SERVER, Kind.REQUEST,
           t.RulesAddParams, t.RulesAddResult,
           "Add a permission rule to a session, or to a settings file."),
    Method("rules/revoke", Direction.CLIENT_TO_SERVER, Kind.REQUEST,
           t.RulesRevokeParams, t.RulesRevokeResult,
           "Remove permission rules from a session (and their settings file)."),
    Method("workspace/trust", Direction.CLIENT_TO_SERVER, Kind.REQUEST,
           t.WorkspaceTrustParams, t.WorkspaceTrustResult,
           "Trust a workspace's project settings as they are, so what they widen applies."),
)

_BY_NAME = {m.name: m for m in METHODS}


def method(name: str) -> Method:
    """The table entry for `name`; KeyError if Heddle has no such method."""
    return _BY_NAME[name]
