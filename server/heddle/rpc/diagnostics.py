"""The client as the tools' `Diagnostics`: `diagnostics/list` for an open document.

Only for a client that declared `capabilities.experimental.heddle.diagnosticRequests`; the
tools ask around an edit that goes through the editor (`heddle.tools.diagnostics`).
"""

from __future__ import annotations

import msgspec
from pygls.exceptions import JsonRpcException

import heddle_protocol as wire
from heddle.core.diagnostics import Diagnostic, DiagnosticsReport, DiagnosticsUnavailable
from heddle.rpc.daemon import Daemon

METHOD = "diagnostics/list"


def report_of(result: wire.DiagnosticsListResult) -> DiagnosticsReport:
    return DiagnosticsReport(tuple(
        Diagnostic(d.range.start.line, d.severity, d.message, d.source,
                   None if d.code is None else str(d.code))
        for d in result.diagnostics), result.generation)


class ClientDiagnostics:
    def __init__(self, server: Daemon):
        self._server = server

    async def report(self, uri: str, timeout: float) -> DiagnosticsReport:
        try:
            raw = await self._server.protocol.request(
                METHOD, wire.DiagnosticsListParams(uri=uri), timeout)
        except TimeoutError:
            raise DiagnosticsUnavailable(f"no answer to {METHOD} within {timeout:g} s") from None
        except JsonRpcException as exc:
            raise DiagnosticsUnavailable(f"{METHOD} was answered with an error: {exc}") from None
        try:
            return report_of(msgspec.convert(raw, wire.DiagnosticsListResult))
        except msgspec.ValidationError as exc:
            raise DiagnosticsUnavailable(f"the answer to {METHOD} is invalid: {exc}") from None


def register(server: Daemon) -> None:
    source = ClientDiagnostics(server)
    server.sessions.documents.diagnostics_source = lambda: (
        source if server.protocol.client_heddle_capabilities.get("diagnosticRequests") is True
        else None)
