"""Handlers for `rules/list`, `rules/add` and `rules/revoke`: a session's permission rules."""

from __future__ import annotations

from typing import TYPE_CHECKING

import heddle_protocol as wire
from heddle_protocol import ErrorCode
from heddle.permissions.policy import Rule, RuleError
from heddle.rpc import convert
from heddle.rpc.handlers import _handler
from heddle.rpc.protocol import RpcError
from heddle.settings import project_settings_path

if TYPE_CHECKING:
    from heddle.rpc.server import HeddleServer


def _invalid(exc: RuleError) -> RpcError:
    return RpcError(ErrorCode.INVALID_PARAMS, f"invalid params: {exc} - at `$.rule`")


def register(server: HeddleServer) -> None:
    async def rules_list(p: wire.RulesListParams) -> wire.RulesListResult:
        session = server.sessions.get(p.session_id)
        files = session.policy.files
        return wire.RulesListResult(
            rules=[convert.rule(r) for r in session.policy.rules],
            user_settings=str(files.user) if files else "",
            project_settings=str(files.project if files and files.project
                                 else project_settings_path(session.workspace)))

    async def rules_add(p: wire.RulesAddParams) -> wire.RulesAddResult:
        session = server.sessions.get(p.session_id)
        try:
            kept = session.policy.add(Rule(p.kind, p.rule, p.scope))
        except RuleError as exc:
            raise _invalid(exc) from None
        return wire.RulesAddResult(rule=convert.rule(kept))

    async def rules_revoke(p: wire.RulesRevokeParams) -> wire.RulesRevokeResult:
        session = server.sessions.get(p.session_id)
        try:
            gone = session.policy.revoke(p.rule, p.kind, p.scope)
        except RuleError as exc:
            raise _invalid(exc) from None
        return wire.RulesRevokeResult(revoked=[convert.rule(r) for r in gone])

    _handler(server, "rules/list", rules_list)
    _handler(server, "rules/add", rules_add)
    _handler(server, "rules/revoke", rules_revoke)
