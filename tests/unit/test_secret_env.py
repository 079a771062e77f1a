"""secret_env.hold() in a real process: where the secrets go, and which variables tools get."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from heddle.processes.environment import tool_env

HOLD = r"""
import json, os, subprocess, sys
from heddle import secret_env
problems = secret_env.hold()
inherited = subprocess.run(["sh", "-c", "env; echo; tr '\\0' '\\n' < /proc/$PPID/environ"],
                           capture_output=True, text=True, timeout=10).stdout
print(json.dumps({"problems": problems, "inherited": inherited,
                  "os.environ": os.environ.get("ANTHROPIC_API_KEY"),
                  "held": secret_env.environ().get("ANTHROPIC_API_KEY")}))
"""


def test_hold_leaves_the_secrets_only_in_memory():
    env = {"PATH": os.environ["PATH"], "ANTHROPIC_API_KEY": "sk-unit-1", "A_PASSWORD": "pw-unit",
           "ANTHROPIC_BASE_URL": "http://127.0.0.1:9", "HEDDLE_DUMPABLE": "1"}
    done = subprocess.run([sys.executable, "-I", "-c", HOLD], env=env, capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["problems"] == []
    assert out["os.environ"] is None and out["held"] == "sk-unit-1"
    # a child started with the inherited environment, reading its own and its parent's
    assert "ANTHROPIC_BASE_URL=http://127.0.0.1:9" in out["inherited"]
    assert "sk-unit-1" not in out["inherited"] and "pw-unit" not in out["inherited"]


def test_tools_get_no_secret_and_no_model_setting_unless_passed():
    environ = {"PATH": "/bin", "ANTHROPIC_API_KEY": "k", "ANTHROPIC_AUTH_TOKEN": "t",
               "ANTHROPIC_BASE_URL": "u", "ANTHROPIC_MODEL": "m", "GITHUB_TOKEN": "g",
               "DB_PASSWORD": "p"}
    assert tool_env(environ) == {"PATH": "/bin"}
    passed = ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "GITHUB_TOKEN"]
    # the model credentials are never passed on, whatever the setting says
    assert tool_env(environ, pass_env=passed) == {"PATH": "/bin", "ANTHROPIC_BASE_URL": "u",
                                                  "GITHUB_TOKEN": "g"}
