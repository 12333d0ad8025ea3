"""A local driver JVM's optimizing compiler at a lower CPU priority than the job's threads.

HotSpot's C2 compiler thread takes most of a core while a JVM starts and runs its first
queries: on a 2-core machine, 3.3 of the 10.6 CPU-seconds of a ``local_session()`` and 1.2-1.9
of the 4.4 of the first micro-batch after it (benchmarks/README.md, 2026-12-07). It runs at
the priority of the threads it competes with: Spark's driver, its executor's tasks and the
Python processes that wait for them. Lowered (``nice``), it compiles in the time they leave
idle, and C1, the fast compiler, keeps its priority.

``CompilerPriority`` watches for the driver JVM this process starts (the child whose command
runs ``SparkSubmit``) while ``getOrCreate()`` waits for it, lowers its C2 threads' priority
as soon as they exist, and looks again for a minute for C2 threads the JVM starts later.
Linux only, where a thread's priority can be set on its own (``setpriority`` on a thread
id); elsewhere nothing happens. An unprivileged process cannot raise a priority back, so
this lasts for the JVM's life: ``ONCEFLOW_SPARK_COMPILER_NICE=0`` turns it off.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from pathlib import Path

from onceflow.proc_stat import PARENT, stat_fields

NICE_VARIABLE = "ONCEFLOW_SPARK_COMPILER_NICE"
DEFAULT_NICE = 10
# HotSpot names its C2 threads "C2 CompilerThread<n>"; the kernel keeps 15 characters.
C2_THREAD_PREFIX = "C2 CompilerThre"
FIND_INTERVAL_S = 0.02  # while the session starts: the sooner, the more compiling it moves
WATCH_S = 60.0  # then, for compiler threads the JVM adds as its queues grow
WATCH_INTERVAL_S = 1.0
SPARK_SUBMIT = b"org.apache.spark.deploy.SparkSubmit"


def compiler_nice() -> int:
    """The nice value for the compiler threads (0: leave them alone)."""
    value = os.environ.get(NICE_VARIABLE, "")
    try:
        return max(0, min(19, int(value))) if value.strip() else DEFAULT_NICE
    except ValueError:
        return DEFAULT_NICE


def lower_compiler_threads(pid: int, nice: int) -> int:
    """Set each C2 thread of JVM ``pid`` to at least ``nice``; how many were lowered now."""
    lowered = 0
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError, ValueError):
                if not (task / "comm").read_text().startswith(C2_THREAD_PREFIX):
                    continue
                tid = int(task.name)
                if os.getpriority(os.PRIO_PROCESS, tid) < nice:
                    os.setpriority(os.PRIO_PROCESS, tid, nice)
                    lowered += 1
    return lowered


def _children(parent: int) -> list[int]:
    """The pids of ``parent``'s child processes: from each of its threads' ``children``
    list (a few small files), or where the kernel has none, from every process's parent."""
    try:
        return [
            int(pid)
            for task in Path(f"/proc/{parent}/task").iterdir()
            for pid in (task / "children").read_text().split()
        ]
    except FileNotFoundError:
        return _children_by_scan(parent)


def _children_by_scan(parent: int) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        with contextlib.suppress(OSError, ValueError):
            if entry.name.isdigit() and int(stat_fields(int(entry.name))[PARENT]) == parent:
                found.append(int(entry.name))
    return found


def _spark_submit_child(parent: int, known: frozenset[int] = frozenset()) -> int | None:
    """The pid of ``parent``'s child process running Spark's driver JVM, if there is one
    besides the ``known`` children (an earlier session's JVM that is still ending)."""
    with contextlib.suppress(OSError):
        for pid in _children(parent):
            if pid in known:
                continue
            with contextlib.suppress(OSError):
                program, _, arguments = Path(f"/proc/{pid}/cmdline").read_bytes().partition(b"\0")
                if program.rsplit(b"/", 1)[-1] == b"java" and SPARK_SUBMIT in arguments:
                    return pid
    return None


class CompilerPriority:
    """Lowers the C2 threads' priority of the driver JVM that this process starts next."""

    def __init__(self, nice: int) -> None:
        self.nice = nice
        self.jvm: int | None = None
        self.known = frozenset(_children(os.getpid()))  # not the JVM about to start
        self._session_started = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="onceflow-compiler-priority", daemon=True
        )

    @classmethod
    def start(cls) -> CompilerPriority | None:
        nice = compiler_nice()
        if nice == 0 or not sys.platform.startswith("linux"):
            return None
        watcher = cls(nice)
        watcher._thread.start()
        return watcher

    def session_started(self, jvm_pid: int | None) -> None:
        """``getOrCreate()`` returned: the JVM is ``jvm_pid`` (None: not a JVM this
        process started), whether or not the watcher found it yet."""
        if jvm_pid is not None:
            self.jvm = jvm_pid
        if self.jvm is not None:
            lower_compiler_threads(self.jvm, self.nice)
        self._session_started.set()

    def _run(self) -> None:
        while self.jvm is None:
            if self._session_started.is_set():
                return  # no JVM of this process's: nothing to do
            found = _spark_submit_child(os.getpid(), self.known)
            if found is not None and self.jvm is None:
                self.jvm = found
            elif found is None:
                self._session_started.wait(FIND_INTERVAL_S)
        # HotSpot starts its compiler threads as it initializes, a few milliseconds after
        # the exec; a JVM without C2 threads by then (C1 only, -Xint) is only looked at again
        # once a second, for threads added as its queues grow.
        since = time.monotonic()
        lowered = False
        while (elapsed := time.monotonic() - since) < WATCH_S:
            lowered = lower_compiler_threads(self.jvm, self.nice) > 0 or lowered
            time.sleep(FIND_INTERVAL_S if not lowered and elapsed < 1.0 else WATCH_INTERVAL_S)
