"""How Heddle starts its own Python processes: never importing from the folder they run in."""

from __future__ import annotations

import subprocess
from pathlib import Path

from heddle.launch import isolation_flags, python_command


def test_a_child_started_in_a_shadowing_folder_imports_the_real_modules(shadowed_workspace):
    command = python_command("heddle", "--version")
    assert command[1] == "-I"
    result = subprocess.run(command, cwd=shadowed_workspace, capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 0 and result.stdout.startswith("heddle 0."), result.stderr


def test_a_user_site_install_keeps_the_user_site(tmp_path: Path):
    user_site = tmp_path / "lib" / "python3.11" / "site-packages"
    assert isolation_flags(str(user_site / "heddle" / "__init__.py"), str(user_site)) == ["-E", "-P"]
    assert isolation_flags("/venv/lib/python3.11/site-packages/heddle/__init__.py",
                           str(user_site)) == ["-I"]
    assert isolation_flags("/venv/lib/python3.11/site-packages/heddle/__init__.py", None) == ["-I"]
