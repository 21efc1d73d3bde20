"""Files that hold secrets must be private to the server's user; the state directory is created private.

A token secret or confirmation key that group or others can read is a secret shared with every
local account, so the server refuses to start with it (as ssh does with a private key) rather
than warn. The state directory (audit log, used-token store) is created mode 0700.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def refuse_exposed(path: Path, setting: str) -> None:
    """Raise ValueError when ``path`` exists and its mode lets group or others read, write or run it."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # a missing or unreadable file gets its own, specific error when it is read
    if stat.S_ISREG(mode) and mode & 0o077:
        raise ValueError(
            f"{setting} {path} is accessible to group or others (mode {stat.S_IMODE(mode):04o}); it holds a "
            f"secret, so the server will not use it: run chmod 600 {path}"
        )


def make_private_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) with mode 0700 for the last component; an existing one is kept."""
    if path.exists():
        return path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir(mode=0o700)
        os.chmod(path, 0o700)  # mkdir's mode is filtered by the umask
    except FileExistsError:
        pass  # created meanwhile by another process: keep it as it is
    except OSError as exc:
        raise ValueError(f"cannot create the state directory {path}: {exc.strerror}") from exc
    return path
