"""Heddle's wire protocol: msgspec Structs for every message and the one method table.

This package imports only msgspec. The daemon, the terminal client, the generated JSON Schema
and the editor clients' constants are all derived from what is defined here.
"""

from heddle_protocol.errors import ErrorCode
from heddle_protocol.events import EVENT_TYPES, Event
from heddle_protocol.methods import METHODS, Direction, Kind, Method, method
from heddle_protocol.types import *  # noqa: F403 - the wire types are this package's API
from heddle_protocol.types import PROTOCOL_VERSION

__all__ = ["ErrorCode", "EVENT_TYPES", "Event", "METHODS", "Direction", "Kind", "Method",
           "method", "PROTOCOL_VERSION"]
