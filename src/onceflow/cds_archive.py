"""Making a Java class-data-sharing archive once per machine, whoever asks first.

    made = make_once(target, record)   # record(partial): run a JVM that writes ``partial``

Used by the Kafka launcher's and the Spark session's archives: concurrent makers wait on a
lock beside the target, each JVM writes a partial file of its own maker
(``-XX:ArchiveClassesAtExit``) while working in a scratch directory removed afterwards,
and only a non-empty archive takes the target's name.

An archive's name is a digest of the JVM and the jars it was made from, so every new
installation (a fresh clone's venv, a pyspark upgrade) makes one more, about 170 MB for
Spark's. Beside each archive a ``.from`` file names what it was made from (the JVM binary,
the jars' folder). When a new archive is made, the others of its kind whose JVM or jars
are gone (a removed venv) are removed first; of the rest, the ``KEEP`` - 1 most recently
used stay (a JVM that starts with one marks it used, ``used()``). Counting the archives of
removed installations pushed out the archive of one still in use, whose sessions then
started in twice the time, silently. Partial files of makers that died are removed too.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

KEEP = 3  # archives of one kind: one per installation in use on this machine


def make_once(
    target: Path,
    record: Callable[[Path, Path], None],
    prefix: str,
    made_from: Iterable[Path] = (),
) -> Path | None:
    """``target`` if it exists; else ``record(partial, scratch)`` makes it, from the files
    and folders ``made_from`` (written beside it). None: no archive."""
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
        sources(target).write_text("".join(f"{path}\n" for path in made_from))
        partial.rename(target)
        prune(target)
    return target


def used(archive: Path) -> Path:
    """Mark ``archive`` as used now (its modification time), so ``prune`` keeps it."""
    with contextlib.suppress(OSError):
        os.utime(archive)
    return archive


def sources(archive: Path) -> Path:
    """The file beside ``archive`` that names what it was made from, one path a line."""
    return archive.with_name(archive.name + ".from")


def prune(kept: Path, keep: int = KEEP) -> list[Path]:
    """Remove the archives of ``kept``'s kind (never ``kept``) whose JVM or jars are gone,
    then those beyond the ``keep`` most recently used, and partial files (of makers that
    died: called with the makers' lock held). Returns the archives and partial files
    removed."""
    kind = kept.name.rsplit("-", 1)[0]  # spark-driver-<digest>.jsa -> spark-driver
    others = [path for path in kept.parent.glob(f"{kind}-*.jsa") if path != kept]
    orphaned = [path for path in others if not _made_from_exists(path)]
    live = sorted((p for p in others if p not in orphaned), key=_modified, reverse=True)
    stale = orphaned + live[keep - 1 :]
    stale += kept.parent.glob(f"{kind}-*.partial-*")
    removed = []
    for path in stale:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed.append(path)
        sources(path).unlink(missing_ok=True)
    for path in kept.parent.glob(f"{kind}-*.jsa.from"):  # of archives removed by hand
        if not path.with_name(path.name.removesuffix(".from")).exists():
            path.unlink(missing_ok=True)
    return removed


def _made_from_exists(archive: Path) -> bool:
    """Every file and folder the archive was made from is still there (True when it does
    not say: an archive of an older onceflow)."""
    try:
        lines = sources(archive).read_text().splitlines()
    except OSError:
        return True
    return all(Path(line).exists() for line in lines if line)


def _modified(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
