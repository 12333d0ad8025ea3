"""Linux inotify through ctypes, for one thing: to learn the instant a SQLite transaction
commits in rollback-journal mode, the default (its ``-journal`` file is deleted then).

A watcher polling file headers misses that instant when the pipeline begins its next
transaction microseconds later (the new journal hides the commit); the kernel's event
does not. On other systems ``JournalDeletions.open`` returns None and the caller polls.
"""

from __future__ import annotations

import ctypes
import os
import select
import struct
import sys
from pathlib import Path

IN_DELETE = 0x00000200
EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of name


class JournalDeletions:
    """Deletions of ``<database>-journal``, as the kernel reports them."""

    def __init__(self, fd: int, journal: str) -> None:
        self.fd = fd
        self.journal = journal

    @classmethod
    def open(cls, database: Path) -> JournalDeletions | None:
        if not sys.platform.startswith("linux"):
            return None
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            return None
        directory = str(database.parent).encode()
        if libc.inotify_add_watch(fd, directory, IN_DELETE) < 0:
            os.close(fd)
            return None
        return cls(fd, database.name + "-journal")

    def wait(self, timeout: float) -> bool:
        """True once the journal was deleted (a commit), within ``timeout`` seconds."""
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return False
        data = os.read(self.fd, 65536)
        offset, found = 0, False
        while offset + EVENT.size <= len(data):
            _, _, _, length = EVENT.unpack_from(data, offset)
            name = data[offset + EVENT.size : offset + EVENT.size + length].rstrip(b"\0")
            found |= name.decode(errors="replace") == self.journal
            offset += EVENT.size + length
        return found

    def close(self) -> None:
        os.close(self.fd)
