"""One process at a time in a data directory, as Kafka's ``.lock`` file in each log dir.

A broker holds an exclusive ``flock`` on ``DATA_DIR/.lock`` from start to stop, and so
does ``onceflow log check``: a second broker on the same directory, or a repair under a
running broker, is refused with the holder's pid instead of two writers cutting and
appending the same segments. The kernel drops the lock when its process dies (SIGKILL
included), so a crashed broker never leaves a stale lock behind; a holder that is alive
and not exiting is refused at once, one just killed is given a moment to exit.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from onceflow.proc_stat import FLAGS, STATE, stat_fields

LOCK_FILE = ".lock"


class DataDirInUse(Exception):
    """Another process holds the data directory's lock."""


class DataDirLock:
    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self, wait_s: float = 0.0, create: bool = True) -> None:
        """Take the lock; DataDirInUse if another process holds it.

        A holder that is alive and not exiting is refused at once; one that is dying
        (just killed) gets up to ``wait_s`` to exit. ``create=False``: a directory
        without a lock file has no holder, and no lock file is created in it.
        """
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        try:
            fd = os.open(self.path, flags, 0o644)
        except FileNotFoundError:
            if create:
                raise
            return
        deadline = time.monotonic() + wait_s
        try:
            while not _try_lock(fd):
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
                if time.monotonic() >= deadline or not _may_be_exiting(holder):
                    raise DataDirInUse(
                        f"{self.path.parent} is in use by another onceflow process "
                        f"(pid {holder}): stop it first"
                    )
                time.sleep(0.05)
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None


PF_EXITING = 0x4  # a task's flag in /proc/PID/stat from the start of its exit
SIGKILL_BIT = 1 << (9 - 1)


def _may_be_exiting(holder: str) -> bool:
    """Whether the lock's holder might be on its way out (dead, a zombie, exiting, or
    with a SIGKILL pending): only then is waiting for the lock worth it."""
    if not holder.isdigit():
        return True  # the holder has not written its pid yet
    pid = int(holder)
    try:
        fields = stat_fields(pid)
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True  # gone: its descriptors are being closed
    except OSError:
        return True  # no /proc: wait as before
    state, flags = fields[STATE], int(fields[FLAGS])
    if state in ("Z", "X") or flags & PF_EXITING:
        return True
    pending = 0
    for line in status.splitlines():
        if line.startswith(("SigPnd:", "ShdPnd:")):
            pending |= int(line.split()[1], 16)
    return bool(pending & SIGKILL_BIT)


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
