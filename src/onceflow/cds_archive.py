"""Making a Java class-data-sharing archive once per machine, whoever asks first.

    made = make_once(target, record)   # record(partial): run a JVM that writes ``partial``

Used by the Kafka launcher's and the Spark session's archives: concurrent makers wait on a
lock beside the target, each JVM writes a partial file of its own maker
(``-XX:ArchiveClassesAtExit``) while working in a scratch directory removed afterwards,
and only a non-empty archive takes the target's name.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path


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
    return target
