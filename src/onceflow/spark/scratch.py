"""A local Spark driver's temporary files, in a folder that does not outlive it for long.

A driver JVM writes its temporary files into ``java.io.tmpdir`` and ``spark.local.dir``
(both ``/tmp`` by default): the block manager's and the shuffle's folders, Spark's own
``spark-*`` and ``artifacts-*`` folders, the native libraries it unpacks (lz4, RocksDB).
It removes them when it exits cleanly; a SIGKILLed driver (the demo's planned kill, every
Spark step of ``onceflow prove``, the chaos tests) leaves them behind, several per kill.

``local_session`` points both at a folder of this process's own,
``<tmp>/onceflow-spark-<uid>/<pid>-<start time>``, and first removes the folders of
processes that have ended. Linux only (a process's start time comes from ``/proc``);
elsewhere Spark keeps its defaults.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

from onceflow.proc_stat import START_TIME, stat_fields


def root() -> Path:
    return Path(tempfile.gettempdir()) / f"onceflow-spark-{os.getuid()}"


def scratch_dir() -> Path | None:
    """This process's folder (made now), after removing those of ended processes; None
    where a process's start time cannot be read or the folder cannot be made."""
    mine = owner_name(os.getpid())
    if mine is None:
        return None
    folder = root()
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        sweep(folder)
        (folder / mine).mkdir(exist_ok=True)
    except OSError:
        return None
    return folder / mine


def sweep(folder: Path) -> list[Path]:
    """Remove the folders whose process has ended (or is another one with the same pid)."""
    removed = []
    with contextlib.suppress(OSError):
        for entry in folder.iterdir():
            pid, _, _ = entry.name.partition("-")
            if pid.isdigit() and owner_name(int(pid)) != entry.name:
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(entry)
    return removed


def owner_name(pid: int) -> str | None:
    """``<pid>-<start time in clock ticks>``, naming one process for as long as the machine
    runs; None if ``pid`` is not running (or there is no ``/proc``)."""
    try:
        return f"{pid}-{stat_fields(pid)[START_TIME]}"
    except OSError:
        return None
