"""Handlers for a session's permission rules (`rules/list`, `rules/add`, `rules/revoke`) and
for trusting a workspace's settings (`workspace/trust`, and the warning while they are not)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import heddle_protocol as wire
from heddle_protocol import ErrorCode
from heddle.permissions.policy import Rule, RuleError
from heddle.permissions.trust import TrustMismatch, review_project, trust_project
from heddle.rpc import convert
from heddle.rpc.daemon import Daemon
from heddle.rpc.dispatch import handler
from heddle.rpc.protocol import RpcError
from heddle.settings import LoadedSettings, load_settings, project_settings_path
from heddle.trust_store import TrustWriteError

log = logging.getLogger(__name__)

WARNING = 2
"""`window/showMessage` type: every client shows these (VS Code, Neovim, `heddle ask`)."""


def _invalid(exc: RuleError) -> RpcError:
    return RpcError(ErrorCode.INVALID_PARAMS, f"invalid params: {exc} - at `$.rule`")


def no_nul(workspace: str) -> None:
    """A NUL makes no path (the OS refuses it): -32012 before anything resolves it."""
    if "\0" in workspace:
        raise RpcError(ErrorCode.INVALID_WORKSPACE,
                       f"workspace {workspace!r} is no path: it holds a NUL")


def settings_for(server: Daemon, workspace: str) -> LoadedSettings:
    """The settings a session on `workspace` opens with. Project settings that are ignored for
    want of trust are announced with a `window/showMessage` warning, before the answer."""
    no_nul(workspace)
    folder = Path(workspace)
    loaded = load_settings(Path(os.path.realpath(folder)) if folder.is_absolute() else None)
    if loaded.untrusted is not None:
        server.protocol.send_raw({"jsonrpc": "2.0", "method": "window/showMessage", "params": {
            "type": WARNING, "message": loaded.untrusted.message}})
    return loaded


def register(server: Daemon) -> None:
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

    async def workspace_trust(p: wire.WorkspaceTrustParams) -> wire.WorkspaceTrustResult:
        no_nul(p.workspace)
        folder = Path(p.workspace)
        if not folder.is_absolute() or not folder.is_dir():
            raise RpcError(ErrorCode.INVALID_WORKSPACE,
                           f"workspace must be an absolute path to an existing folder: {folder}")
        if p.dry_run:
            review = review_project(Path(os.path.realpath(folder)))
            return wire.WorkspaceTrustResult(settings_file=str(review.file), sha256=review.sha256,
                                             enables=review.enables, trusted=review.trusted)
        try:
            trusted = trust_project(Path(os.path.realpath(folder)), p.sha256)
        except TrustMismatch as exc:
            raise RpcError(ErrorCode.SETTINGS_CHANGED, str(exc)) from None
        except TrustWriteError as exc:
            raise RpcError(ErrorCode.INTERNAL_ERROR, str(exc)) from None
        log.info("trusted %s (%s): %s", trusted.file, trusted.sha256,
                 "; ".join(trusted.enables) or "nothing needed trust")
        return wire.WorkspaceTrustResult(
            settings_file=str(trusted.file), sha256=trusted.sha256, enables=trusted.enables)

    handler(server, "rules/list", rules_list)
    handler(server, "rules/add", rules_add)
    handler(server, "rules/revoke", rules_revoke)
    handler(server, "workspace/trust", workspace_trust)
