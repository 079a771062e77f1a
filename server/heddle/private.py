"""Heddle's own files and folders, readable by the user only.

Transcripts, saved tool results and the log hold the code, the commands and their output; the
trust record says which workspaces widen permissions. Whatever the umask, Heddle makes its
folders 0700 (every level it creates, as the XDG base directory spec asks) and its files 0600.

Heddle's own state (the `heddle` folder in `$XDG_STATE_HOME`, its `sessions/` and
`tool-results/` folders, the files in them, the default log file, and the trust record) is also
tightened to those modes when Heddle next opens it, if an older Heddle or a looser umask left it
readable by others. Anything else that exists already (a parent such as `~/.local/state`, the
config folder the user's settings live in, a log file `HEDDLE_LOG_FILE` names) keeps its mode.
"""

from __future__ import annotations

import fcntl
import logging
import os
import stat
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import BinaryIO

from heddle.regular import NotRegularFile

log = logging.getLogger(__name__)

FOLDER_MODE = 0o700
FILE_MODE = 0o600


def make_dirs(path: Path, own_from: Path | None = None) -> None:
    """Make folder `path` and its missing parents, each 0700. Existing folders from `own_from`
    (Heddle's own: `path` itself or one of its parents) down to `path` are tightened to 0700;
    those above it are left as they are. Raises OSError."""
    missing: list[Path] = []
    level = path
    while not level.is_dir():
        missing.append(level)
        if level.parent == level:
            break
        level = level.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, FOLDER_MODE)
        except FileExistsError:
            if not folder.is_dir():
                raise
            continue
        os.chmod(folder, FOLDER_MODE)  # (the umask may have taken more than group and other)
    if own_from is not None:
        level = path
        while True:
            tighten(level, FOLDER_MODE)
            if level == own_from or level.parent == level:
                break
            level = level.parent


def tighten(target: Path | int, mode: int) -> None:
    """Take from `target` (a path, symlinks not followed, or an open fd) the permission bits
    beyond `mode`; a file that is not the user's, or that cannot be changed, is left as it is
    and logged."""
    try:
        st = os.fstat(target) if isinstance(target, int) else os.lstat(target)
        if stat.S_ISLNK(st.st_mode) or not stat.S_IMODE(st.st_mode) & ~mode:
            return
        if st.st_uid != os.geteuid():
            log.warning("%s is readable by others and not yours: its mode is left as it is",
                        target)
            return
        if isinstance(target, int):
            os.fchmod(target, stat.S_IMODE(st.st_mode) & mode)
        else:
            os.chmod(target, stat.S_IMODE(st.st_mode) & mode)
        log.info("%s was readable by others: made %o", target, stat.S_IMODE(st.st_mode) & mode)
    except OSError as exc:
        log.warning("cannot restrict the permissions of %s: %s", target, exc)


def open_append(path: Path) -> BinaryIO:
    """Heddle's own file `path` opened for appending, unbuffered: made 0600 if new, tightened
    to 0600 if not. Only a regular file: a symlink, a named pipe or a device planted at `path`
    is refused (NotRegularFile) without waiting for a reader, and never written through."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, FILE_MODE)
    except OSError as exc:
        if os.path.islink(path):
            raise NotRegularFile(f"{path} is a symbolic link, not a file") from None
        if stat.S_ISFIFO(_mode(path)):  # ENXIO: a pipe no one reads
            raise NotRegularFile(f"{path} is a named pipe, not a file") from None
        raise exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(f"{path} is not a regular file")
        tighten(fd, FILE_MODE)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "ab", buffering=0)
    except BaseException:
        os.close(fd)
        raise


def _mode(path: Path) -> int:
    try:
        return os.lstat(path).st_mode
    except OSError:
        return 0


class PrivateLog(RotatingFileHandler):
    """The log file, and each one rotation starts, made 0600; an existing one tightened to
    0600 only when it is Heddle's own (`own`: the default log in the state folder)."""

    def __init__(self, path: Path, own: bool, max_bytes: int, backups: int):
        self._own = own
        super().__init__(path, maxBytes=max_bytes, backupCount=backups)

    def _open(self):  # (called by the base class, at the start and after each rotation)
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
                     FILE_MODE)
        if self._own:
            tighten(fd, FILE_MODE)
        return os.fdopen(fd, "a", encoding=self.encoding, errors=self.errors)
