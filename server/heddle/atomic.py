"""Replacing a file's content in one step: a reader sees the old content or the new, never a
half-written file, even after a crash.

The new content goes to a temporary file beside the target, reaches the disk, takes the
target's permission bits, and replaces the target with one rename. A failure leaves the target
as it was and no temporary file behind.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path


def _umask() -> int:
    """The process's umask, read without changing it (os.umask sets it, racing other threads)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def write_atomic(path: Path, data: str | bytes, *, follow_symlinks: bool,
                 private: bool = True, own: bool = False) -> None:
    """Make `data` (text: UTF-8, line endings as given) the content of `path`, creating the
    file and its missing folders if needed. A new file is readable by its owner only when
    `private` (the user's settings); otherwise it gets the mode any program's new file gets
    (0666 less the umask), as a file the user made in their project would. An existing file
    keeps its mode, unless `own` (Heddle's own records): then it is 0600 whatever it was.

    `follow_symlinks`: a symlink at `path` is written through, and stays a link to a file
    with the new content (the user's settings file kept in a dotfiles repository stays
    there). Without it, a symlink at `path` is replaced by a file: a tool writes the path it
    was allowed, which was symlink-free when it was checked. Raises OSError."""
    target = Path(os.path.realpath(path)) if follow_symlinks else path
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        st = os.stat(target, follow_symlinks=False)
    except FileNotFoundError:
        mode = None
    else:
        mode = stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else None
    if own:
        mode = 0o600
    elif mode is None and not private:
        mode = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            # on disk before the rename, or a crash can leave the new name on an empty file
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
