"""The import contracts of docs/architecture.md: the layers point one way, the clients use none
of the daemon, and the kernel and the wire types import only the standard library and msgspec.

`lint-imports` (import-linter) reads the contracts from pyproject.toml; imports inside
functions and under TYPE_CHECKING count like any other.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
PURE = ("heddle.core", "heddle_protocol")
"""Packages whose only dependencies outside themselves are the standard library and msgspec."""


def test_the_import_contracts_are_kept():
    done = subprocess.run([str(LINT_IMPORTS), "--no-cache", "--config", "pyproject.toml"],
                          cwd=ROOT, capture_output=True, text=True, timeout=50)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_the_kernel_and_the_wire_types_import_only_the_standard_library_and_msgspec():
    graph = grimp.build_graph("heddle", "heddle_protocol", include_external_packages=True,
                              cache_dir=None)
    outside = {}
    for package in PURE:
        for module in graph.find_descendants(package) | {package}:
            for imported in graph.find_modules_directly_imported_by(module):
                top = imported.split(".")[0]
                if not (imported == package or imported.startswith(package + ".")
                        or top in sys.stdlib_module_names or top == "msgspec"):
                    outside.setdefault(module, set()).add(imported)
    assert outside == {}
