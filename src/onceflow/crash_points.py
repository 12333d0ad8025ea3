"""Crash points: SIGKILL a process at a chosen step of its flow, exactly like a machine failure.

No ``finally`` block, no flush: the chaos matrix and the tests arm a step, and whatever
reaches it dies there. Armed through the environment, so that it reaches worker processes.

**Pattern steps** (a ``Runner``, the relay, the chaos flows; names in each pattern's
``STEPS`` and docs/patterns.md) are counted: the process dies the N-th time it reaches
an armed step::

    ONCEFLOW_CRASH_AT="after_db_commit:3"          # third time the step is reached
    ONCEFLOW_CRASH_AT="before_offset_commit,after_produce:2"

Arm them in code with ``CrashPoints({"after_db_commit": 3})``, or observe them with
``CrashPoints(callback=...)``.

**Pause points** stop a process at a pattern step instead, so that the fault engine
(``onceflow.faults``) can do something else at exactly that moment (restart the broker,
cut the network, lock the database) and then let it go on::

    ONCEFLOW_PAUSE_AT="after_db_commit:2"    # the second time the step is reached
    ONCEFLOW_PAUSE_DIR=/tmp/run/worker-1     # it writes <dir>/paused, waits for <dir>/release

**Spark sink steps** run in many processes (driver and executors, retried tasks), so they
are armed by micro-batch and task partition instead, and ``spark_step_reached`` checks
them::

    ONCEFLOW_SPARK_CRASH_AT="database.after_commit@2"      # when batch 2 reaches the step
    ONCEFLOW_SPARK_CRASH_AT="kafka.after_task_commit@1/0"  # batch 1, task partition 0
    ONCEFLOW_SPARK_CRASH_PGID=12345                        # kill this process group

``ONCEFLOW_SPARK_CRASH_FILE`` names a file that gets one line per crash (worker stderr is
lost with the JVM). Without ``ONCEFLOW_SPARK_CRASH_PGID`` the reaching process kills
itself; a job calls ``crash_whole_process_group()`` before it starts Spark so that the
crash takes down the Python driver, the JVM and its workers together.

Spark pause points stop a task at a step instead, so that a test can kill something else
(an executor JVM on a Spark cluster) while the task is in the middle of a batch::

    ONCEFLOW_SPARK_PAUSE_AT="database.after_stage@1,kafka.before_task_commit@1"
    ONCEFLOW_SPARK_PAUSE_DIR=/tmp/pauses     # <dir>/<step> gets "pid batch partition"
    ONCEFLOW_SPARK_PAUSE_SECONDS=120         # how long the task sleeps there

Only the first process to reach a step pauses (a retried task goes on).

Spark steps: ``database.after_stage`` (a staging task), ``database.before_task_commit`` (a
direct task, inside its open transaction), ``database.after_task_commit`` (a direct
task), ``database.before_commit`` and ``database.after_commit`` (the driver),
``kafka.before_task_commit`` (inside the task's open transaction),
``kafka.after_task_commit``, ``kafka.before_commit``.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping

ENV_VAR = "ONCEFLOW_CRASH_AT"
PAUSE_VAR = "ONCEFLOW_PAUSE_AT"
PAUSE_DIR_VAR = "ONCEFLOW_PAUSE_DIR"
PAUSED_FILE = "paused"
RELEASE_FILE = "release"
SPARK_ENV_VAR = "ONCEFLOW_SPARK_CRASH_AT"
SPARK_PGID_VAR = "ONCEFLOW_SPARK_CRASH_PGID"
SESSION_GROUP = "session"  # SPARK_PGID_VAR's value for the session leader's group
SPARK_FILE_VAR = "ONCEFLOW_SPARK_CRASH_FILE"
SPARK_PAUSE_PREFIX = "ONCEFLOW_SPARK_PAUSE_"
SPARK_PAUSE_VAR = "ONCEFLOW_SPARK_PAUSE_AT"
SPARK_PAUSE_DIR_VAR = "ONCEFLOW_SPARK_PAUSE_DIR"
SPARK_PAUSE_SECONDS_VAR = "ONCEFLOW_SPARK_PAUSE_SECONDS"


def kill_self(message: str, record_in: str | None = None, group: int | None = None) -> None:
    """Say why on stderr (and append it to the file ``record_in``), then SIGKILL this
    process, or its process ``group``."""
    print(message, file=sys.stderr, flush=True)
    if record_in:
        with open(record_in, "a", encoding="utf-8") as file:
            file.write(message + "\n")
            file.flush()
            os.fsync(file.fileno())
    if group is not None:
        os.killpg(group, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


class CrashPoints:
    """Counts pattern steps reached; kills the process at an armed step's N-th occurrence."""

    def __init__(
        self,
        armed: Mapping[str, int] | None = None,
        callback: Callable[[str, int], None] | None = None,
    ) -> None:
        self.armed = dict(armed or {})
        self.callback = callback
        self.counts: Counter[str] = Counter()

    @classmethod
    def parse(cls, spec: str) -> dict[str, int]:
        armed: dict[str, int] = {}
        for item in spec.split(","):
            item = item.strip()
            if not item:
                continue
            name, _, count = item.partition(":")
            try:
                armed[name.strip()] = int(count) if count else 1
            except ValueError:
                raise ValueError(f"bad crash point {item!r}: expected STEP or STEP:N") from None
        return armed

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> CrashPoints:
        env = environ if environ is not None else os.environ
        pause = cls.parse(env.get(PAUSE_VAR, ""))
        directory = env.get(PAUSE_DIR_VAR)
        callback = pause_callback(pause, directory) if pause and directory else None
        return cls(cls.parse(env.get(ENV_VAR, "")), callback)

    def reached(self, step: str) -> None:
        self.counts[step] += 1
        count = self.counts[step]
        if self.callback is not None:
            self.callback(step, count)
        if self.armed.get(step) == count:
            kill_self(f"onceflow crash point: SIGKILL at {step} #{count}")


NO_CRASHES = CrashPoints()


def pause_callback(armed: Mapping[str, int], directory: str) -> Callable[[str, int], None]:
    """A CrashPoints callback that pauses at an armed step's N-th occurrence: it writes
    ``<directory>/paused`` and waits until ``<directory>/release`` exists."""

    def pause(step: str, count: int) -> None:
        if armed.get(step) != count:
            return
        print(f"onceflow pause point: paused at {step} #{count}", file=sys.stderr, flush=True)
        paused = os.path.join(directory, PAUSED_FILE)
        release = os.path.join(directory, RELEASE_FILE)
        with open(paused + ".part", "w", encoding="utf-8") as file:
            file.write(f"{os.getpid()} {step} {count}\n")
        os.replace(paused + ".part", paused)
        while not os.path.exists(release):
            time.sleep(0.005)
        os.remove(release)

    return pause


def spark_step_armed(spec: str, step: str, batch_id: int | None, partition: int | None) -> bool:
    """Does ``STEP[@BATCH[/PARTITION]],...`` name this step of this batch and partition?"""
    for item in spec.split(","):
        name, _, where = item.strip().partition("@")
        if name != step:
            continue
        if not where:
            return True
        batch, _, part = where.partition("/")
        if batch and (batch_id is None or int(batch) != batch_id):
            continue
        if part and (partition is None or int(part) != partition):
            continue
        return True
    return False


def crash_whole_process_group() -> None:
    """When a Spark crash point is armed, make it kill this process's group: the variable
    is inherited by the JVM that Spark starts next and by its Python workers."""
    if os.environ.get(SPARK_ENV_VAR):
        os.environ[SPARK_PGID_VAR] = str(os.getpgrp())


def _pause(step: str, batch_id: int | None, partition: int | None) -> None:
    spec = os.environ.get(SPARK_PAUSE_VAR)
    directory = os.environ.get(SPARK_PAUSE_DIR_VAR)
    if not spec or not directory or not spark_step_armed(spec, step, batch_id, partition):
        return
    try:  # the first process to reach the step claims it
        os.close(os.open(os.path.join(directory, f"{step}.claimed"), os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return
    line = f"{os.getpid()} {batch_id} {partition}\n"
    partial = os.path.join(directory, f".{step}.{os.getpid()}")
    with open(partial, "w", encoding="utf-8") as file:
        file.write(line)
    os.replace(partial, os.path.join(directory, step))  # appears whole to a watcher
    print(f"onceflow spark pause point: {step} {line.strip()}", file=sys.stderr, flush=True)
    time.sleep(float(os.environ.get(SPARK_PAUSE_SECONDS_VAR, "60")))


def spark_step_reached(
    step: str, batch_id: int | None = None, partition: int | None = None
) -> None:
    """A Spark sink reached ``step`` of micro-batch ``batch_id`` in task ``partition``."""
    _pause(step, batch_id, partition)
    spec = os.environ.get(SPARK_ENV_VAR)
    if not spec or not spark_step_armed(spec, step, batch_id, partition):
        return
    kill_self(
        f"onceflow spark crash point: SIGKILL at {step} batch={batch_id} partition={partition}",
        record_in=os.environ.get(SPARK_FILE_VAR),
        group=_crash_group(os.environ.get(SPARK_PGID_VAR)),
    )


def _crash_group(value: str | None) -> int | None:
    """The process group a Spark crash point kills: a number, or ``session`` for the group
    of this process's session leader (a driver started in a session of its own, as prove
    starts it; PySpark's worker daemon is in a process group of its own, not a session)."""
    if not value:
        return None
    if value == SESSION_GROUP:
        return os.getsid(0)
    return int(value)
