"""One process at a time in a data directory, as Kafka's ``.lock`` file in each log dir.

A broker holds an exclusive ``flock`` on ``DATA_DIR/.lock`` from start to stop, and so
does ``onceflow log check``: a second broker on the same directory, or a repair under a
running broker, is refused with the holder's pid instead of two writers cutting and
appending the same segments. The kernel drops the lock when its process dies (SIGKILL
included), so a crashed broker never leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

LOCK_FILE = ".lock"


class DataDirInUse(Exception):
    """Another process holds the data directory's lock."""


class DataDirLock:
    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self, wait_s: float = 0.0) -> None:
        """Take the lock, trying for up to ``wait_s`` (a process just killed may not have
        exited yet); DataDirInUse if another process still holds it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + wait_s
        try:
            while not _try_lock(fd):
                if time.monotonic() >= deadline:
                    holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
                    raise DataDirInUse(
                        f"{self.path.parent} is in use by another onceflow process "
                        f"(pid {holder}): stop it first"
                    )
                time.sleep(0.05)
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
