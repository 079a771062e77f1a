"""The answer to ACP's `initialize`, made without the SDK.

The SDK's schema module builds its pydantic models when it is imported (about a second of CPU),
so `heddle.acp.door` answers a first `initialize` with this while the SDK and the core load on
a worker thread, as the LSP door's boot does; the agent answers a later one with the same.
"""

from __future__ import annotations

from typing import Any

import heddle
from heddle.envvars import no_model_endpoint

AUTH_METHOD = {
    "id": "anthropic-env",
    "name": "Anthropic API key in the environment",
    "description": "Heddle reads ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL for a gateway or a "
                   "local model server) from the environment the editor starts `heddle acp` "
                   "with. Set it there (e.g. `env` in Zed's agent_servers entry) and restart "
                   "the agent.",
}


def authenticated(env: dict[str, str]) -> bool:
    """Whether a model call can be made: the model client's own rule (ANTHROPIC_AUTH_TOKEN
    alone is no credential it uses)."""
    return no_model_endpoint(env) is None


def initialize_result(env: dict[str, str], transcripts: bool) -> dict[str, Any]:
    """What Heddle can do, honestly: `transcripts` False (HEDDLE_NO_TRANSCRIPTS) means no
    session can be loaded, listed or resumed."""
    return {
        "protocolVersion": 1,
        "agentCapabilities": {
            "loadSession": transcripts,
            "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
            "mcpCapabilities": {"http": True, "sse": False},
            "sessionCapabilities": {"list": {}, "resume": {}, "close": {}} if transcripts
            else {"close": {}},
        },
        "agentInfo": {"name": "heddle", "title": "Heddle", "version": heddle.__version__},
        "authMethods": [] if authenticated(env) else [AUTH_METHOD],
    }


def early(message: dict[str, Any]) -> bool:
    """Whether `message` is an `initialize` the door may answer before the SDK is loaded (one
    the SDK would accept; anything else waits for it, and its error)."""
    params = message.get("params")
    return (message.get("method") == "initialize" and "id" in message
            and isinstance(params, dict) and type(params.get("protocolVersion")) is int
            and 0 <= params["protocolVersion"] <= 65535
            and isinstance(params.get("clientCapabilities", {}), dict))


def client_fs(params: dict[str, Any]) -> tuple[bool, bool]:
    """(readTextFile, writeTextFile) as an `initialize`'s params advertise them."""
    caps = params.get("clientCapabilities") or {}
    fs = caps.get("fs") if isinstance(caps, dict) else None
    fs = fs if isinstance(fs, dict) else {}
    return fs.get("readTextFile") is True, fs.get("writeTextFile") is True


def client_terminal(params: dict[str, Any]) -> bool:
    """Whether an `initialize`'s params advertise `terminal`."""
    caps = params.get("clientCapabilities") or {}
    return isinstance(caps, dict) and caps.get("terminal") is True


def client_compaction(params: dict[str, Any]) -> bool:
    """Whether an `initialize`'s params declare `session.compaction` (an object, `{}`: ACP v1's
    opt-in to `compaction_update` and `compaction_summary_chunk`)."""
    caps = params.get("clientCapabilities") or {}
    session = caps.get("session") if isinstance(caps, dict) else None
    return isinstance(session, dict) and isinstance(session.get("compaction"), dict)
