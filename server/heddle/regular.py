"""Opening only regular files: a workspace (or a settings folder) may hold a named pipe, a
device or a symlink to one (`/dev/zero`), and reading those blocks forever or never ends.

A pipe is opened without waiting for a writer (O_NONBLOCK), then refused with everything else
that is not a regular file; what is left is finite.
"""

from __future__ import annotations

import fcntl
import os
import stat
from pathlib import Path
from typing import BinaryIO


class NotRegularFile(OSError):
    """The path is a pipe, a device, a socket or a folder: nothing Heddle reads as a file."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def open_regular(path: Path, buffering: int = -1, follow_symlinks: bool = True) -> BinaryIO:
    """`path` (symlinks followed, unless not `follow_symlinks`) opened for reading in binary;
    NotRegularFile if it is not a regular file (or is a symlink), other OSErrors as `open`
    raises them."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_symlinks else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError:
        if not follow_symlinks and os.path.islink(path):
            raise NotRegularFile(f"{path} is a symbolic link, not a file") from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(f"{path} is {_kind(mode)}, not a file")
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb", buffering=buffering)
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: Path, limit: int | None = None) -> bytes:
    """The whole content of regular file `path`; NotRegularFile if it is not one, or if it is
    larger than `limit` bytes (None: no limit)."""
    with open_regular(path) as f:
        data = f.read() if limit is None else f.read(limit + 1)
    if limit is not None and len(data) > limit:
        raise NotRegularFile(f"{path} is larger than {limit:,} bytes")
    return data
