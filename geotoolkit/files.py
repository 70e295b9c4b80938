"""Files geotoolkit creates hold addresses: they are readable by their owner only. Stdlib only."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["private_file"]


def private_file(path: Path) -> None:
    """Create ``path`` readable by its owner only (0600), and its missing directories (0700).

    An existing file or directory keeps its mode. SQLite gives the ``-wal`` and
    ``-shm`` files it creates next to a database the database file's mode.
    """
    missing: list[Path] = []
    directory = path.parent
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another process was quicker
            directory.mkdir(mode=0o700)
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
