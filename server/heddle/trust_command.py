"""`heddle trust`: review a workspace's project settings and trust them.

Until then, what `<workspace>/.heddle/settings.toml` would widen (allow rules, a more
permissive mode, hooks, secrets passed to tools) is ignored; see docs/permissions.md.
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from pathlib import Path
from typing import TextIO

from heddle import trust_store
from heddle.permissions.trust import TrustMismatch, review_project, trust_project
from heddle.regular import read_regular
from heddle.settings import SETTINGS_LIMIT, SettingsFiles, project_settings_path, user_settings_path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-w", "--workspace", default=".", help="the workspace folder (default: .)")
    p.add_argument("-y", "--yes", action="store_true",
                   help="trust without asking (the review is still printed)")
    p.add_argument("--revoke", action="store_true",
                   help="stop trusting the workspace's project settings")


def run(args: argparse.Namespace, out: TextIO = sys.stdout, stdin: TextIO = sys.stdin) -> int:
    workspace = Path(args.workspace).resolve()
    if not workspace.is_dir():
        print(f"heddle: {workspace} is not a folder", file=sys.stderr)
        return 2
    if args.revoke:
        store = SettingsFiles(user_settings_path(), project_settings_path(workspace)).trust
        gone = trust_store.forget(store, workspace)
        print(f"{'No longer trusted' if gone else 'Was not trusted'}: "
              f"{project_settings_path(workspace)}", file=out)
        return 0
    review = review_project(workspace)
    if review.sha256 is None:
        print(f"{review.file} does not exist: nothing to trust.", file=out)
        return 0
    try:
        shown = read_regular(review.file, SETTINGS_LIMIT)
    except OSError as exc:
        print(f"heddle: cannot read {review.file}: {exc}", file=sys.stderr)
        return 1
    try:  # sessions ignore such a file (they use the defaults): trusting it would mean nothing
        tomllib.loads(shown.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        what = "UTF-8" if isinstance(exc, UnicodeDecodeError) else "TOML"
        print(f"heddle: {review.file} is not valid {what} ({exc}): there is nothing to trust "
              "until it is fixed", file=sys.stderr)
        return 1
    if not review.enables:
        print(f"{review.file} only narrows permissions: it applies without trust.", file=out)
        return 0
    state = "is trusted" if review.trusted else "is not trusted"
    print(f"{review.file} {state} (SHA-256 {review.sha256}). Trusted, it enables:", file=out)
    for line in review.enables:
        print(f"  - {line}", file=out)
    print("\n" + "\n".join("    " + line for line in
                             shown.decode("utf-8", "replace").splitlines()), file=out)
    if trust_store.digest(shown) != review.sha256:  # what was printed is what gets trusted
        print(f"heddle: {review.file} changed while it was read; run it again", file=sys.stderr)
        return 1
    if review.trusted:
        return 0
    if not args.yes:
        if not stdin.isatty():
            print("heddle: not a terminal; run it again with --yes to trust these settings",
                  file=sys.stderr)
            return 1
        print("Trust these settings? Hooks run commands on your machine. [y/N] ", end="",
              file=out, flush=True)
        if stdin.readline().strip().lower() not in ("y", "yes"):
            print("Not trusted.", file=out)
            return 1
    try:
        trust_project(workspace, review.sha256)
    except (TrustMismatch, trust_store.TrustWriteError) as exc:
        print(f"heddle: {exc}", file=sys.stderr)
        return 1
    print("Trusted: sessions opened from now on apply these settings.", file=out)
    return 0
