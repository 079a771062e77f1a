"""`heddle demo`: a real multi-step turn on a sample project, against the scripted model."""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-y", "--yes", action="store_true", help="answer the permission prompt with allow")


def run(args: argparse.Namespace) -> int:
    raise SystemExit("demo: not ready")
