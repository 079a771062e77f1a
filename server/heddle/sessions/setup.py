"""What a front door's turns run with, read from the environment in one place.

`heddle serve` (heddle.rpc.server) and `heddle acp` (heddle.acp.agent) both call `from_env`,
so a setting read here reaches the turns of every door, and a setting added later cannot reach
one door and not the other: the model client (one HTTP connection pool per process), the
tools, the limits (`table_limits`, with `HEDDLE_CONTEXT_WINDOW`), the prompt-cache defaults,
the default, fallback, summary and compact models, the editor timeouts, how long an edit
waits for the editor's diagnostics, and how long a session's first model call waits for its
environment (`HEDDLE_ENVIRONMENT_BOUND`).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, replace
from typing import Mapping

from heddle.briefing.gather import BOUND
from heddle.envvars import number
from heddle.model.anthropic_client import AnthropicModel, ModelSettings
from heddle.sessions.session import SessionOptions
from heddle.sessions.turns import CompactionListener, TurnDeps, table_limits
from heddle.settings import LoadedSettings, cache_from_env
from heddle.tools.diagnostics import DEFAULT_WAIT
from heddle.tools.registry import builtin_tools

log = logging.getLogger(__name__)

DEFAULT_MODEL = "claude-sonnet-4-5"


@dataclass(frozen=True)
class DoorSetup:
    deps: TurnDeps
    model: AnthropicModel
    """The process's one model client (`deps.model_for` answers it for every model id)."""
    default_model: str
    """`HEDDLE_MODEL`, else DEFAULT_MODEL: the model of a session that names none."""
    options: SessionOptions
    """The sessions' defaults: `HEDDLE_FALLBACK_MODEL`, `HEDDLE_SUMMARY_MODEL`,
    `HEDDLE_COMPACT_MODEL`."""
    permission_timeout: float
    """Seconds a permission request waits for the client (`HEDDLE_PERMISSION_TIMEOUT`)."""
    edit_timeout: float
    """Seconds an edit or file read through the client may take (`HEDDLE_APPLY_EDIT_TIMEOUT`)."""

    def defaults_for(self, settings: LoadedSettings) -> SessionOptions:
        """A session's defaults in a workspace with `settings`: the environment's options, the
        settings' fallback model after `HEDDLE_FALLBACK_MODEL`, the settings' `thinking`,
        `effort` and `[models]`."""
        chosen = settings.settings
        return replace(self.options, fallback_model=self.options.fallback_model
                       or chosen.fallback_model,
                       thinking_budget={"auto": None, "off": 0}.get(chosen.thinking,
                                                                    chosen.thinking),
                       effort=chosen.effort, model_limits=chosen.models or None,
                       loop=chosen.loop)


def from_env(env: Mapping[str, str], compactions: CompactionListener | None = None
             ) -> DoorSetup:
    """The setup `env` describes (a number that is not one: ValueError naming the variable; a
    bad cache setting: logged, its default used). `compactions`: the door's listener for model
    compactions (`TurnDeps.compactions`)."""
    window = int(number(env, "HEDDLE_CONTEXT_WINDOW", 0, whole=True))
    model = AnthropicModel(ModelSettings.from_env(dict(env)))
    cache, problems = cache_from_env(env)
    for problem in problems:
        log.warning("%s", problem)
    deps = TurnDeps(model_for=lambda _model_id: model, tools=builtin_tools(),
                    new_id=lambda: uuid.uuid4().hex, limits_for=table_limits(window),
                    cache=cache, compactions=compactions,
                    diagnostics_wait=number(env, "HEDDLE_DIAGNOSTICS_WAIT", DEFAULT_WAIT),
                    environment_bound=number(env, "HEDDLE_ENVIRONMENT_BOUND", BOUND))
    options = SessionOptions(fallback_model=env.get("HEDDLE_FALLBACK_MODEL") or None,
                             summary_model=env.get("HEDDLE_SUMMARY_MODEL") or None,
                             compact_model=env.get("HEDDLE_COMPACT_MODEL") or None)
    return DoorSetup(
        deps, model, env.get("HEDDLE_MODEL") or DEFAULT_MODEL, options,
        number(env, "HEDDLE_PERMISSION_TIMEOUT", 600, minimum=0.001),
        number(env, "HEDDLE_APPLY_EDIT_TIMEOUT", 30, minimum=0.001))
