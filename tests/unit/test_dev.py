"""`./dev`'s check of a venv (and of the Python that would make one), on fake interpreters:
a venv with the wrong Python or a broken one is rebuilt rather than failing every run."""

from __future__ import annotations

import subprocess
from pathlib import Path

DEV = Path(__file__).resolve().parents[2] / "dev"


def call(function: str, *args: str) -> str:
    """What one of dev's shell functions prints, the script sourced (nothing else runs)."""
    done = subprocess.run(["bash", "-c", f'source "$1" && shift && {function} "$@"', "test",
                           str(DEV), *args],
                          capture_output=True, text=True, timeout=10)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def fake_python(venv: Path, script: str) -> Path:
    python = venv / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\n" + script)
    python.chmod(0o755)
    return python


def test_a_wrong_or_broken_venv_is_named(tmp_path: Path):
    assert call("venv_problem", str(tmp_path / "none")) == "there is none"
    (tmp_path / "empty").mkdir()
    assert call("venv_problem", str(tmp_path / "empty")) == "it has no bin/python"
    fake_python(tmp_path / "312", "echo 3.12\n")
    assert call("venv_problem", str(tmp_path / "312")) == "its python is Python 3.12"
    fake_python(tmp_path / "gone", "exit 127\n")  # what a removed base interpreter gives
    assert call("venv_problem", str(tmp_path / "gone")) == "its python does not run"
    # the right version, but nothing imports
    fake_python(tmp_path / "nopip", 'case "$2" in *version_info*) echo 3.11;; *) exit 1;; esac\n')
    assert call("venv_problem", str(tmp_path / "nopip")) == "its python cannot import pip"


def test_the_venv_dev_setup_made_is_usable():
    assert call("venv_problem", str(DEV.parent / ".venv")) == ""


def test_the_python_that_makes_the_venv_must_be_3_11(tmp_path: Path):
    assert call("python_problem", str(fake_python(tmp_path / "a", "echo 3.12\n"))).endswith(
        "is Python 3.12")
    assert call("python_problem", str(tmp_path / "missing")).endswith("is not installed")
    assert call("python_problem", str(fake_python(tmp_path / "b", "echo 3.11\n"))) == ""


def test_a_plain_run_runs_every_suite_and_a_filtered_run_only_what_it_names():
    every = call("test_plan").splitlines()
    assert [line.split("|")[0] for line in every] == ["unit", "e2e", "acp", "neovim", "vscode"]
    assert call("test_plan", "e2e", "vscode").splitlines() == [every[1], every[4]]
    assert call("test_plan", "tests/unit/test_dev.py", "-k", "a b") == \
        r"pytest|pytest tests/unit/test_dev.py -k a\ b"
    assert call("test_plan", "e2e", "-x") == "pytest|pytest e2e -x"  # not all suite names


def test_a_suites_line_says_what_pytest_counted(tmp_path: Path):
    log = tmp_path / "log"
    log.write_text("....\n=========== 3 passed, 1 skipped in 0.25s ===========\n")
    assert call("pytest_counts", str(log)) == "3 passed, 1 skipped"
    log.write_text("F.\n1 failed, 1 passed in 2.00s (0:00:02)\n")
    assert call("pytest_counts", str(log)) == "1 failed, 1 passed"
