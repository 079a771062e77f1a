"""Where the daemon's logs go: stderr (which editors show the user) gets warnings one line each;
the log file gets everything, tracebacks included."""

from __future__ import annotations

import os
import subprocess
import sys

FAIL = """
import logging
from heddle.cli import setup_logging
setup_logging()
try:
    1 / 0
except ZeroDivisionError:
    logging.getLogger("heddle.test").exception("handling the request failed")
logging.getLogger("heddle.test").info("only in the file")
"""


def test_stderr_gets_one_line_per_warning_and_the_file_keeps_the_traceback(tmp_path):
    log = tmp_path / "heddle.log"
    env = {**os.environ, "HEDDLE_LOG_FILE": str(log), "HEDDLE_LOG_LEVEL": "INFO"}
    run = subprocess.run([sys.executable, "-I", "-c", FAIL], env=env, capture_output=True,
                         text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    (line,) = run.stderr.splitlines()
    assert line.endswith("ERROR heddle.test: handling the request failed")
    kept = log.read_text()
    assert "Traceback" in kept and "ZeroDivisionError" in kept and "only in the file" in kept
