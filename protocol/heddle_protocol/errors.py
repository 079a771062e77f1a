"""JSON-RPC error codes the daemon answers with."""

import enum


class ErrorCode(enum.IntEnum):
    """Every error code a client can receive. Standard JSON-RPC/LSP codes first."""

    PARSE_ERROR = -32700
    """The message body was not valid JSON."""
    INVALID_REQUEST = -32600
    """Not a JSON-RPC request, or a request after `shutdown`."""
    METHOD_NOT_FOUND = -32601
    """No such method."""
    INVALID_PARAMS = -32602
    """`params` failed validation; the message names the field."""
    INTERNAL_ERROR = -32603
    """A bug in the daemon. The message says what failed; no traceback is sent."""
    SERVER_NOT_INITIALIZED = -32002
    """A request arrived before `initialize`."""
    REQUEST_CANCELLED = -32800
    """The request was cancelled with `$/cancelRequest` before it produced a result."""
    SESSION_NOT_FOUND = -32010
    """No session with that id in this daemon."""
    SESSION_BUSY = -32011
    """The session already runs a turn and the request asked not to wait."""
    INVALID_WORKSPACE = -32012
    """The workspace folder is not an absolute path to an existing directory."""
    COMPACTION_FAILED = -32014
    """`session/compact` could not summarise the session (nothing to compact, or it failed)."""
    TRANSCRIPT_UNREADABLE = -32013
    """The session's transcript cannot be loaded (e.g. written by a newer Heddle)."""
    SETTINGS_CHANGED = -32015
    """`workspace/trust` was asked to trust content the project settings file no longer has."""
    SESSION_IN_USE = -32016
    """The session is live in another Heddle process (another editor window, `heddle ask`)."""
