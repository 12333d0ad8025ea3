"""Making a Java class-data-sharing archive once per machine, whoever asks first.

    made = make_once(target, record)   # record(partial): run a JVM that writes ``partial``

Used by the Kafka launcher's and the Spark session's archives: concurrent makers wait on a
lock beside the target, each JVM writes a partial file of its own maker
(``-XX:ArchiveClassesAtExit``) while working in a scratch directory removed afterwards,
and only a non-empty archive takes the target's name.

An archive's name is a digest of the JVM and the jars it was made from, so every new
installation (a fresh clone's venv, a pyspark upgrade) makes one more, about 170 MB for
Spark's. A new archive is kept with the ``KEEP`` - 1 most recently used others of its kind
(a JVM that starts with one marks it used, ``used()``); the rest, and partial files of
makers that died, are removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

KEEP = 3  # archives of one kind: one per installation in use on this machine


def make_once(target: Path, record: Callable[[Path, Path], None], prefix: str) -> Path | None:
    """``target`` if it exists; else ``record(partial, scratch)`` makes it. None: no archive."""
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_file():
            return target
        partial = target.with_suffix(f".partial-{os.getpid()}")
        scratch = Path(tempfile.mkdtemp(prefix=prefix))
        try:
            record(partial, scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        if not partial.is_file() or partial.stat().st_size == 0:
            partial.unlink(missing_ok=True)
            return None
        partial.rename(target)
        prune(target)
    return target


def used(archive: Path) -> Path:
    """Mark ``archive`` as used now (its modification time), so ``prune`` keeps it."""
    with contextlib.suppress(OSError):
        os.utime(archive)
    return archive


def prune(kept: Path, keep: int = KEEP) -> list[Path]:
    """Remove the archives of ``kept``'s kind beyond the ``keep`` most recently used (never
    ``kept``), and partial files (of makers that died: called with the makers' lock held).
    Returns what was removed."""
    kind = kept.name.rsplit("-", 1)[0]  # spark-driver-<digest>.jsa -> spark-driver
    archives = sorted(
        (path for path in kept.parent.glob(f"{kind}-*.jsa") if path != kept),
        key=_modified,
        reverse=True,
    )
    stale = archives[keep - 1 :]
    stale += kept.parent.glob(f"{kind}-*.partial-*")
    removed = []
    for path in stale:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed.append(path)
    return removed


def _modified(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
