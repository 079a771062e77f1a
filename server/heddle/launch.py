"""How Heddle starts its own Python processes (the daemon from `heddle ask`): isolated from the
folder they run in.

`python -m` puts the working folder first on the import path, and the daemon runs in the
user's workspace: a project's `json.py`, `anyio.py` or `heddle/` would be imported instead of
the real one. `-I` leaves the working folder out, and also PYTHON* variables and the user's
site-packages. Only when Heddle itself was installed in the user's site-packages
(`pip install --user`) is that kept, with `-E -P`: the same isolation from the workspace.
"""

from __future__ import annotations

import site
import sys
from pathlib import Path

import heddle


def isolation_flags(package_file: str, user_site: str | None) -> list[str]:
    """The interpreter flags for a child that imports the package at `package_file`."""
    if user_site and Path(package_file).resolve().is_relative_to(Path(user_site).resolve()):
        return ["-E", "-P"]
    return ["-I"]


def python_command(module: str, *args: str) -> list[str]:
    """`python -m module args...` with this interpreter, isolated from the working folder."""
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    return [sys.executable, *isolation_flags(heddle.__file__, user_site), "-m", module, *args]
