"""The scripted model: a local HTTP server that speaks the Anthropic Messages API.

Tests, the demo and benchmarks point the real `anthropic` SDK at it. Each model name is a
scenario: a list of scripted responses, including faults. See docs/scripted-model.md.
"""

from .cache import Breakpoint, CacheAccount, ManualClock
from .models import API_MODELS, ApiModel
from .scenario import Scenario, ScenarioError, load_scenario, parse_scenario
from .server import RecordedRequest, ScriptedServer

__all__ = [
    "API_MODELS", "ApiModel", "Breakpoint", "CacheAccount", "ManualClock", "RecordedRequest",
    "Scenario", "ScenarioError", "ScriptedServer", "load_scenario", "parse_scenario",
]
