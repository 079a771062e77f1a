"""Heddle's distribution name, `heddle-agent` (the PyPI project `heddle` is someone else's), and
that nothing tells a user to install that other project."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SKIP = {"node_modules", ".e2e", "out", "dist", "__pycache__", ".venv"}
INSTALLS_PYPI_HEDDLE = re.compile(r"\bpip3? install (--?[\w-]+ )*heddle(?![\w./-])")


def test_the_distribution_heddle_agent_gives_the_heddle_package_and_command():
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"] == "heddle-agent"
    dist = importlib.metadata.distribution("heddle-agent")
    assert [ep.value for ep in dist.entry_points
            if ep.group == "console_scripts" and ep.name == "heddle"] == ["heddle.cli:main"]
    with pytest.raises(importlib.metadata.PackageNotFoundError):  # ./dev setup drops the old one
        importlib.metadata.distribution("heddle")


def test_no_doc_or_message_says_to_install_the_pypi_project_heddle():
    files = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
    for folder in ("clients", "server", "protocol"):
        files += [p for p in (ROOT / folder).rglob("*")
                  if p.suffix in (".md", ".txt", ".lua", ".ts", ".json", ".py")
                  and not SKIP.intersection(p.relative_to(ROOT).parts)]
    offenders = [f"{path.relative_to(ROOT)}:{number}"
                 for path in files
                 for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
                 if INSTALLS_PYPI_HEDDLE.search(line)]
    assert offenders == []
    assert INSTALLS_PYPI_HEDDLE.search("install Heddle (pip install heddle) so that")
    assert not INSTALLS_PYPI_HEDDLE.search("pip install /path/to/heddle")
