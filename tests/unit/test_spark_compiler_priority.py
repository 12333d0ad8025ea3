"""A local driver JVM's C2 compiler threads, and only they, get a lower CPU priority
(``onceflow.spark.compiler_priority``), shown on real processes whose threads carry the
names HotSpot gives its compiler threads."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from onceflow.proc_stat import NICE, stat_fields
from onceflow.spark import compiler_priority
from onceflow.spark.compiler_priority import (
    DEFAULT_NICE,
    NICE_VARIABLE,
    CompilerPriority,
    compiler_nice,
    lower_compiler_threads,
)

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="thread priorities through /proc"
)

# A process with a thread named as each of HotSpot's compilers, and their thread ids.
JVM_LIKE = r"""
import threading, time
def named(name, done):
    with open(f"/proc/self/task/{threading.get_native_id()}/comm", "w") as comm:
        comm.write(name)
    done.set()
    time.sleep(60)
named_all = []
for name in ("C2 CompilerThread0", "C1 CompilerThread0"):
    named_all.append(threading.Event())
    threading.Thread(target=named, args=(name, named_all[-1]), daemon=True).start()
for done in named_all:
    done.wait()
print("named", flush=True)
time.sleep(60)
"""


def thread_nice(pid: int) -> dict[str, int]:
    """Thread name -> its nice value (proc(5): the stat field 19)."""
    return {
        (task / "comm").read_text().strip(): int(stat_fields(int(task.name))[NICE])
        for task in Path(f"/proc/{pid}/task").iterdir()
    }


def test_only_the_c2_threads_are_lowered_once() -> None:
    process = subprocess.Popen([sys.executable, "-c", JVM_LIKE], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        process.stdout.readline()  # the threads are named
        assert lower_compiler_threads(process.pid, 7) == 1
        nice = thread_nice(process.pid)
        assert nice.pop("C2 CompilerThre") == 7
        assert set(nice.values()) == {0}  # C1 and the main thread
        assert "C1 CompilerThre" in nice
        assert lower_compiler_threads(process.pid, 7) == 0  # already there
        assert lower_compiler_threads(process.pid, 3) == 0  # never raised back
        assert thread_nice(process.pid)["C2 CompilerThre"] == 7
    finally:
        process.kill()
        process.wait()
    assert lower_compiler_threads(process.pid, 7) == 0  # an ended process: nothing


# A parent of three children: Spark's launcher, a Python that names SparkSubmit, the driver.
PARENT = r"""
import subprocess, sys, time
def child(program, *arguments):
    return subprocess.Popen([program, "-c", "import time; time.sleep(60)", *arguments],
                            executable=sys.executable).pid
pids = [child("/opt/jdk/bin/java", "org.apache.spark.launcher.Main"),
        child("/usr/bin/python3", "org.apache.spark.deploy.SparkSubmit"),
        child("/opt/jdk/bin/java", "-cp", "/x/*", "org.apache.spark.deploy.SparkSubmit")]
print(*pids, flush=True)
time.sleep(60)
"""


def test_the_driver_jvm_is_the_java_child_running_spark_submit() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    children = [int(pid) for pid in parent.stdout.readline().split()]
    try:
        # A process's command line reads empty for a moment after its exec (the watcher
        # polls through it): Popen returns as the exec closes the descriptors, before the
        # kernel has set the new program's arguments.
        deadline = time.monotonic() + 10
        while (found := compiler_priority._spark_submit_child(parent.pid)) is None:
            assert time.monotonic() < deadline, "no driver found"
            time.sleep(0.01)
        assert found == children[-1]
        # a driver that was there before the watcher started (an earlier session's, ending)
        assert compiler_priority._spark_submit_child(parent.pid, frozenset(children)) is None
        assert compiler_priority._spark_submit_child(children[-1]) is None
        listed = sorted(compiler_priority._children(parent.pid))
        by_scan = sorted(compiler_priority._children_by_scan(parent.pid))  # no lists: kernels
        assert listed == by_scan == sorted(children)  # built without CONFIG_PROC_CHILDREN
    finally:
        for pid in children:
            os.kill(pid, signal.SIGKILL)
        parent.kill()
        parent.wait()


def test_nothing_watches_when_the_nice_value_is_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(NICE_VARIABLE, "0")
    assert CompilerPriority.start() is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, DEFAULT_NICE), ("", DEFAULT_NICE), ("0", 0), ("5", 5), ("40", 19), ("-3", 0),
     ("high", DEFAULT_NICE)],
)  # fmt: skip
def test_the_nice_value_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: str | None, expected: int
) -> None:
    if value is None:
        monkeypatch.delenv(NICE_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(NICE_VARIABLE, value)
    assert compiler_nice() == expected
