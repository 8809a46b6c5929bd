"""One pt2doctor process at a time per output directory.

Contract: `claim(directory)` is a context manager holding an exclusive, non-blocking `flock` on
`directory/.pt2doctor.lock` for as long as the run writes there; a second run on the same directory
raises `DirectoryBusy` at once instead of mixing its files with the first's. The lock is the kernel's:
it goes away with the process that held it, so a run killed with SIGKILL leaves no stale lock behind.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_NAME = ".pt2doctor.lock"


class DirectoryBusy(Exception):
    """Another pt2doctor run is writing to this directory."""


@contextmanager
def claim(directory: Path) -> Iterator[None]:
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DirectoryBusy(f"another pt2doctor run is writing to {directory}; wait for it or give "
                                "another --out") from None
        yield
    finally:
        os.close(fd)  # closing releases the lock
