"""Every fsync the broker makes, in one place: files, directories, atomic replacement.

Power loss keeps only what was fsynced: a file's data after ``fdatasync``, a new, renamed
or deleted directory entry after an fsync of its directory. The helpers here do those
steps in the right order, so callers cannot forget one.

Two test-only hooks, off unless their environment variable is set:

- ``ONCEFLOW_FSYNC_JOURNAL=PATH``: after each successful file fsync, append
  ``<inode> <size>`` to PATH (the size as it was before the fsync started, so it never
  claims bytes written during it). The crash simulator (``onceflow.log.power_loss``) cuts
  every file back to its last journalled size, as power loss would.
- ``ONCEFLOW_FSYNC_FAIL=PATH``: while PATH exists, every file fsync fails with EIO, as a
  failing disk does.
"""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

JOURNAL_ENV = "ONCEFLOW_FSYNC_JOURNAL"
FAIL_ENV = "ONCEFLOW_FSYNC_FAIL"

_journal_lock = threading.Lock()


def _check_injected_failure() -> None:
    trigger = os.environ.get(FAIL_ENV)
    if trigger and os.path.exists(trigger):
        raise OSError(errno.EIO, "injected fsync failure", trigger)


def _journal(fd: int, size: int) -> None:
    path = os.environ.get(JOURNAL_ENV)
    if not path:
        return
    line = f"{os.fstat(fd).st_ino} {size}\n".encode()
    with _journal_lock:
        journal = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(journal, line)
        finally:
            os.close(journal)


def sync_file(fd: int) -> None:
    """Make a file's data durable (fdatasync). Raises OSError on failure."""
    journalling = bool(os.environ.get(JOURNAL_ENV))
    size = os.fstat(fd).st_size if journalling else 0
    _check_injected_failure()
    os.fdatasync(fd)
    if journalling:
        _journal(fd, size)


def sync_directory(directory: Path | str) -> None:
    """Make the directory's entries (created, renamed, deleted files) durable."""
    fd = open_directory(directory)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def create_file(path: Path, name_durable: bool = True) -> int:
    """Create (or open) a file for appending; a new file's name is made durable, unless
    ``name_durable`` is false (the caller fsyncs the directory later)."""
    existed = path.exists()
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    if not existed and name_durable:
        try:
            sync_directory(path.parent)
        except OSError:
            os.close(fd)
            raise
    return fd


def write_atomically(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new content.

    Write a temporary file, fsync it, rename it over ``path``, fsync the directory.
    """
    directory = open_directory(path.parent)
    try:
        write_atomically_in(directory, path.name, data, mode)
    finally:
        os.close(directory)


def open_directory(directory: Path | str) -> int:
    return os.open(directory, os.O_RDONLY | os.O_DIRECTORY)


def write_atomically_in(directory: int, name: str, data: bytes, mode: int = 0o644) -> None:
    """``write_atomically`` in the directory open as ``directory``: if that directory is
    deleted meanwhile, the write fails (FileNotFoundError) and a new directory of the same
    name is not touched."""
    temporary = name + ".tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode, dir_fd=directory)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        sync_file(fd)
    finally:
        os.close(fd)
    os.replace(temporary, name, src_dir_fd=directory, dst_dir_fd=directory)
    os.fsync(directory)


def append_durably(path: Path, data: bytes) -> None:
    """Append ``data`` to a small file and make it durable (with its name if new)."""
    fd = create_file(path)
    try:
        size = os.fstat(fd).st_size
        try:
            if os.write(fd, data) != len(data):
                raise OSError(errno.ENOSPC, "short write", str(path))
            sync_file(fd)
        except OSError:
            os.ftruncate(fd, size)  # no torn entry stays behind to misalign later ones
            raise
    finally:
        os.close(fd)
