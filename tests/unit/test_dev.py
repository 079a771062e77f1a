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
